// RUN: mind-opt %s --pass=to-aten | filecheck %s
// The seed example after AOTAutograd: four ATen overloads, an f32[4] result.

fx.graph @graph0 {guards = ["TENSOR_MATCH: L['a']"]} {
  %l_a_ = fx.placeholder @L_a_ : f32[4, 128][128, 1]cuda:0
  %l_b_ = fx.placeholder @L_b_ : f32[4, 128][128, 1]cuda:0
  %l_c_ = fx.placeholder @L_c_ : f32[4, 128][128, 1]cuda:0
  %add = fx.call_function @operator.add(%l_a_, %l_b_) : f32[4, 128][128, 1]cuda:0
  %relu = fx.call_method @relu(%l_c_) : f32[4, 128][128, 1]cuda:0
  %mul = fx.call_function @operator.mul(%add, %relu) : f32[4, 128][128, 1]cuda:0
  %sum_1 = fx.call_method @sum(%mul) {dim = -1} : f32[4][1]cuda:0
  fx.output((%sum_1,))
}

// CHECK:      aten.graph @graph0_forward(%arg0_1: f32[4, 128][128, 1]cuda:0, %arg1_1: f32[4, 128][128, 1]cuda:0, %arg2_1: f32[4, 128][128, 1]cuda:0) {
// CHECK-NEXT:   %add = aten.add.Tensor(%arg0_1, %arg1_1) : f32[4, 128][128, 1]cuda:0
// CHECK-NEXT:   %relu = aten.relu.default(%arg2_1) : f32[4, 128][128, 1]cuda:0
// CHECK-NEXT:   %mul = aten.mul.Tensor(%add, %relu) : f32[4, 128][128, 1]cuda:0
// CHECK-NEXT:   %sum_1 = aten.sum.dim_IntList(%mul, [-1]) : f32[4][1]cuda:0
// CHECK-NEXT:   aten.output(%sum_1)
// CHECK-NEXT: }
