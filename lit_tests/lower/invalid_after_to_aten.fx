// RUN: mind-opt %s --pass=inline --verify-diagnostics
// AOTAutograd's ops have no text: a later pass's error about them is at the graph they came from.

// expected-error@+1 {{'loops.output' reads '%neg', which is not a buffer: run realize first}}
fx.graph @graph0 {
  %l_x_ = fx.placeholder @L_x_ : f32[8][1]cpu
  %neg = fx.call_function @operator.neg(%l_x_) : f32[8][1]cpu
  fx.output((%neg,))
}
