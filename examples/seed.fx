// The seed, ((a + b) * c.relu()).sum(dim=-1) on three f32[4, 128] CPU tensors, as Dynamo
// captures it: mind.capture(seed, a, b, c).
fx.graph @graph0 {guards = ["AUTOGRAD_SAVED_TENSORS_HOOKS", "DEFAULT_DEVICE", "DETERMINISTIC_ALGORITHMS", "GLOBAL_STATE", "GRAD_MODE", "SHAPE_ENV", "TENSOR_MATCH: L['a']", "TENSOR_MATCH: L['b']", "TENSOR_MATCH: L['c']", "TORCH_FUNCTION_STATE"]} {
  %l_a_ = fx.placeholder @L_a_ : f32[4, 128][128, 1]cpu
  %l_b_ = fx.placeholder @L_b_ : f32[4, 128][128, 1]cpu
  %l_c_ = fx.placeholder @L_c_ : f32[4, 128][128, 1]cpu
  %add = fx.call_function @operator.add(%l_a_, %l_b_) : f32[4, 128][128, 1]cpu
  %relu = fx.call_method @relu(%l_c_) : f32[4, 128][128, 1]cpu
  %mul = fx.call_function @operator.mul(%add, %relu) : f32[4, 128][128, 1]cpu
  %sum_1 = fx.call_method @sum(%mul) {dim = -1} : f32[4][1]cpu
  fx.output((%sum_1,))
}
