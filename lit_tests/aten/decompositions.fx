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

// -----
// A bf16 convolution whose stride is its kernel (a patch embedding; mind's rule): the patches
// (a 6×7 image's tail dropped) gathered as rows, times the flattened weight, the bias in the
// matmul; the result laid out as the library's

fx.graph @graph2 {
  %l_x_ = fx.placeholder @L_x_ : bf16[2, 3, 6, 7][126, 42, 7, 1]cpu
  %l_w_ = fx.placeholder @L_w_ : bf16[5, 3, 2, 2][12, 4, 2, 1]cpu
  %l_b_ = fx.placeholder @L_b_ : bf16[5][1]cpu
  %out = fx.call_function @torch.conv2d(%l_x_, %l_w_, %l_b_, (2, 2), (0, 0), (1, 1), 1) : bf16[2, 5, 3, 3][45, 9, 3, 1]cpu
  fx.output((%out,))
}

// CHECK-LABEL: aten.graph @graph2_forward(
// CHECK-NEXT:    %slice_1 = aten.slice.Tensor(%arg0_1, 3, 0, 6) : bf16[2, 3, 6, 6][126, 42, 7, 1]cpu
// CHECK-NEXT:    %view = aten.view.default(%slice_1, [2, 3, 3, 2, 3, 2]) : bf16[2, 3, 3, 2, 3, 2][126, 42, 14, 7, 2, 1]cpu
// CHECK-NEXT:    %permute = aten.permute.default(%view, [0, 2, 4, 1, 3, 5]) : bf16[2, 3, 3, 3, 2, 2][126, 14, 2, 42, 7, 1]cpu
// CHECK-NEXT:    %clone = aten.clone.default(%permute) {memory_format = @torch.contiguous_format} : bf16[2, 3, 3, 3, 2, 2][108, 36, 12, 4, 2, 1]cpu
// CHECK-NEXT:    %view_1 = aten.view.default(%clone, [18, 12]) : bf16[18, 12][12, 1]cpu
// CHECK-NEXT:    %view_2 = aten.view.default(%arg1_1, [5, -1]) : bf16[5, 12][12, 1]cpu
// CHECK-NEXT:    %permute_1 = aten.permute.default(%view_2, [1, 0]) : bf16[12, 5][1, 12]cpu
// CHECK-NEXT:    %addmm = aten.addmm.default(%arg2_1, %view_1, %permute_1) : bf16[18, 5][5, 1]cpu
// CHECK-NEXT:    %view_3 = aten.view.default(%addmm, [2, 3, 3, 5]) : bf16[2, 3, 3, 5][45, 15, 5, 1]cpu
// CHECK-NEXT:    %permute_2 = aten.permute.default(%view_3, [0, 3, 1, 2]) : bf16[2, 5, 3, 3][45, 1, 15, 5]cpu
// CHECK-NEXT:    %clone_1 = aten.clone.default(%permute_2) {memory_format = @torch.contiguous_format} : bf16[2, 5, 3, 3][45, 9, 3, 1]cpu
// CHECK-NEXT:    aten.output(%clone_1)

// -----
// The gradient of a bf16 embedding table (mind's rule): the 32 indices' rows summed in f32 into a
// buffer of a row per index, at the slot a plain scatter of positions gives each index, then
// each sum rounded and written into a bf16 table of zeros; no f32 table of 1000 rows. Padding
// and out-of-range indices add zeros (to row 0's sum)

fx.graph @graph3 {
  %l_g_ = fx.placeholder @L_g_ : bf16[4, 8, 16][128, 16, 1]cpu
  %l_i_ = fx.placeholder @L_i_ : i64[4, 8][8, 1]cpu
  %out = fx.call_function @torch.ops.aten.embedding_dense_backward.default(%l_g_, %l_i_, 1000, 3, false) : bf16[1000, 16][16, 1]cpu
  fx.output((%out,))
}

// CHECK-LABEL: aten.graph @graph3_forward(
// CHECK-NEXT:    %view = aten.view.default(%arg1_1, [32]) : i64[32][1]cpu
// CHECK-NEXT:    %ge = aten.ge.Scalar(%view, 0) : b8[32][1]cpu
// CHECK-NEXT:    %lt = aten.lt.Scalar(%view, 1000) : b8[32][1]cpu
// CHECK-NEXT:    %bitwise_and = aten.bitwise_and.Tensor(%ge, %lt) : b8[32][1]cpu
// CHECK-NEXT:    %ne = aten.ne.Scalar(%view, 3) : b8[32][1]cpu
// CHECK-NEXT:    %bitwise_and_1 = aten.bitwise_and.Tensor(%bitwise_and, %ne) : b8[32][1]cpu
// CHECK-NEXT:    %scalar_tensor = aten.scalar_tensor.default(0) {{.*}} : i64[][]cpu
// CHECK-NEXT:    %where = aten.where.self(%bitwise_and_1, %view, %scalar_tensor) : i64[32][1]cpu
// CHECK-NEXT:    %view_1 = aten.view.default(%arg0_1, [32, 16]) : bf16[32, 16][16, 1]cpu
// CHECK-NEXT:    %_to_copy = aten._to_copy.default(%view_1) {dtype = f32} : f32[32, 16][16, 1]cpu
// CHECK-NEXT:    %view_2 = aten.view.default(%bitwise_and_1, [32, 1]) : b8[32, 1][1, 1]cpu
// CHECK-NEXT:    %scalar_tensor_1 = aten.scalar_tensor.default(0.0) {{.*}} : f32[][]cpu
// CHECK-NEXT:    %where_1 = aten.where.self(%view_2, %_to_copy, %scalar_tensor_1) : f32[32, 16][16, 1]cpu
// CHECK-NEXT:    %arange = aten.arange.start_step(0, 32) {{.*}} : i64[32][1]cpu
// CHECK-NEXT:    %full = aten.full.default([1000], 0) {{.*}} : i64[1000][1]cpu
// CHECK-NEXT:    %index_put = aten.index_put.default(%full, [%where], %arange) : i64[1000][1]cpu
// CHECK-NEXT:    %index = aten.index.Tensor(%index_put, [%where]) : i64[32][1]cpu
// CHECK-NEXT:    %full_1 = aten.full.default([32, 16], 0) {dtype = f32, {{.*}} : f32[32, 16][16, 1]cpu
// CHECK-NEXT:    %index_put_1 = aten.index_put.default(%full_1, [%index], %where_1, true) : f32[32, 16][16, 1]cpu
// CHECK-NEXT:    %full_2 = aten.full.default([1000, 16], 0) {dtype = bf16, {{.*}} : bf16[1000, 16][16, 1]cpu
// CHECK-NEXT:    %index_1 = aten.index.Tensor(%index_put_1, [%index]) : f32[32, 16][16, 1]cpu
// CHECK-NEXT:    %_to_copy_1 = aten._to_copy.default(%index_1) {dtype = bf16} : bf16[32, 16][16, 1]cpu
// CHECK-NEXT:    %index_put_2 = aten.index_put.default(%full_2, [%where], %_to_copy_1) : bf16[1000, 16][16, 1]cpu
// CHECK-NEXT:    aten.output(%index_put_2)

// -----
// In f32 the table is the sum itself: torch's rule, accumulating into it

fx.graph @graph4 {
  %l_g_ = fx.placeholder @L_g_ : f32[4, 8, 16][128, 16, 1]cpu
  %l_i_ = fx.placeholder @L_i_ : i64[4, 8][8, 1]cpu
  %out = fx.call_function @torch.ops.aten.embedding_dense_backward.default(%l_g_, %l_i_, 1000, 3, false) : f32[1000, 16][16, 1]cpu
  fx.output((%out,))
}

// CHECK-LABEL: aten.graph @graph4_forward(
// CHECK:         %full = aten.full.default([1000, 16], 0) {dtype = f32, {{.*}} : f32[1000, 16][16, 1]cpu
// CHECK:         aten.index_put.default(%full, {{.*}}, true) : f32[1000, 16][16, 1]cpu

// -----
// More indices than rows: the dense f32 table is no more work, so torch's rule

fx.graph @graph5 {
  %l_g_ = fx.placeholder @L_g_ : bf16[4, 8, 16][128, 16, 1]cpu
  %l_i_ = fx.placeholder @L_i_ : i64[4, 8][8, 1]cpu
  %out = fx.call_function @torch.ops.aten.embedding_dense_backward.default(%l_g_, %l_i_, 20, -1, false) : bf16[20, 16][16, 1]cpu
  fx.output((%out,))
}

// CHECK-LABEL: aten.graph @graph5_forward(
// CHECK:         %full = aten.full.default([20, 16], 0) {dtype = f32, {{.*}} : f32[20, 16][16, 1]cpu
// CHECK:         aten.index_put.default(%full, {{.*}}, true) : f32[20, 16][16, 1]cpu
// CHECK:         aten._to_copy.default({{.*}}) {dtype = bf16} : bf16[20, 16][16, 1]cpu
