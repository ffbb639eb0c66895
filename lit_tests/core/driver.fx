// RUN: mind-opt %s --pass=to-aten --print-ir-after-all --time-passes --dump-pass-pipeline -o %t 2>&1 | filecheck %s
// RUN: filecheck %s --check-prefix=OUT < %t
// RUN: mind-opt --list-passes | filecheck %s --check-prefix=LIST
// RUN: not mind-opt %s --pass=bogus 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not mind-opt %s -p "to-aten{nope=1}" 2>&1 | filecheck %s --check-prefix=OPTION

fx.graph @graph0 {
  %l_x_ = fx.placeholder @L_x_ : f32[8][1]cpu
  %neg = fx.call_function @operator.neg(%l_x_) : f32[8][1]cpu
  fx.output((%neg,))
}

// CHECK: Pass Manager with 1 passes:
// CHECK-NEXT: to-aten
// CHECK: // *** IR Dump After to-aten ***
// CHECK-NEXT: aten.graph @graph0_forward(%arg0_1: f32[8][1]cpu) {
// CHECK-NEXT:   %neg = aten.neg.default(%arg0_1) : f32[8][1]cpu
// CHECK: Pass execution timing report
// CHECK: to-aten
// CHECK: Total

// OUT: aten.graph @graph0_forward

// LIST: Available passes:
// LIST: to-aten {{ *}}fx -> aten

// UNKNOWN: mind-opt: --pass:1:1: error: unknown pass 'bogus' (known: {{.*}}to-aten
// UNKNOWN-NEXT: {{^}}bogus{{$}}
// UNKNOWN-NEXT: {{^}}^{{$}}

// OPTION: mind-opt: --pipeline:1:8: error: pass 'to-aten' has no option 'nope' (options: none)
