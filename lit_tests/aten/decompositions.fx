// RUN: mind-opt %s --split-input-file --pass=to-aten | filecheck %s
// Decompositions chosen as Inductor chooses them, where they end in ops mind lowers to kernels.

// masked_scatter (mind's rule, Inductor's two steps): each set element's place in the source is
// the running count of the mask before it; a gather from there (clamped into the source)
// where the mask is set, self elsewhere

fx.graph @graph0 {
  %l_x_ = fx.placeholder @L_x_ : f32[4, 5][5, 1]cpu
  %l_m_ = fx.placeholder @L_m_ : b8[4, 5][5, 1]cpu
  %l_s_ = fx.placeholder @L_s_ : f32[30][1]cpu
  %out = fx.call_function @torch.masked_scatter(%l_x_, %l_m_, %l_s_) : f32[4, 5][5, 1]cpu
  fx.output((%out,))
}

// CHECK-LABEL: aten.graph @graph0_forward(
// CHECK-NEXT:    %view = aten.view.default(%arg1_1, [-1]) : b8[20][1]cpu
// CHECK-NEXT:    %cumsum = aten.cumsum.default(%view, 0) : i64[20][1]cpu
// CHECK-NEXT:    %sub = aten.sub.Tensor(%cumsum, 1) : i64[20][1]cpu
// CHECK:         %clamp = aten.clamp.default(%sub, 0, 29) : i64[20][1]cpu
// CHECK-NEXT:    %index = aten.index.Tensor(%arg2_1, [%clamp]) : f32[20][1]cpu
// CHECK:         %where_1 = aten.where.self(%view_2, %where, %view_1) : f32[20][1]cpu
// CHECK-NEXT:    %view_3 = aten.view.default(%where_1, [4, 5]) : f32[4, 5][5, 1]cpu
// CHECK-NEXT:    aten.output(%view_3)

// -----
// addmv (torch's rule, in Inductor's table): beta * self + alpha * mv, and mv a product and a sum

fx.graph @graph1 {
  %l_b_ = fx.placeholder @L_b_ : f32[5][1]cpu
  %l_a_ = fx.placeholder @L_a_ : f32[5, 10][10, 1]cpu
  %l_v_ = fx.placeholder @L_v_ : f32[10][1]cpu
  %out = fx.call_function @torch.addmv(%l_b_, %l_a_, %l_v_) {beta = 0.5} : f32[5][1]cpu
  fx.output((%out,))
}

// CHECK-LABEL: aten.graph @graph1_forward(
// CHECK-NEXT:    %mul = aten.mul.Tensor(%arg1_1, %arg2_1) : f32[5, 10][10, 1]cpu
// CHECK-NEXT:    %sum_1 = aten.sum.dim_IntList(%mul, [1]) : f32[5][1]cpu
// CHECK-NEXT:    %mul_1 = aten.mul.Tensor(%sum_1, 1) : f32[5][1]cpu
// CHECK-NEXT:    %mul_2 = aten.mul.Tensor(%arg0_1, 0.5) : f32[5][1]cpu
// CHECK-NEXT:    %add = aten.add.Tensor(%mul_1, %mul_2) : f32[5][1]cpu
// CHECK-NEXT:    aten.output(%add)
