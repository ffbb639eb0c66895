// RUN: mind-opt %s --split-input-file --pass=attention-masks | filecheck %s
// Masks made from sizes alone are run once: an all-true one goes, the causal triangle becomes
// is_causal, and the ops only the mask used go with it. Other masks stay.

// BERT's mask without an attention_mask: every key index is >= 0.
fx.graph @all_true {
  %q = fx.placeholder @q : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %kv = fx.call_function @torch.arange(8) {device = cpu} : i64[8][1]cpu
  %ge = fx.call_function @operator.ge(%kv, 0) : b8[8][1]cpu
  %row = fx.call_function @operator.getitem(%ge, (none, none, none, @builtins.slice(none, none, none))) : b8[1, 1, 1, 8][8, 8, 8, 1]cpu
  %mask = fx.call_method @expand(%row, 2, -1, 8, -1) : b8[2, 1, 8, 8][0, 8, 0, 1]cpu
  %sdpa = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %mask, scale = 0.25} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  fx.output((%sdpa,))
}
// CHECK-LABEL: fx.graph @all_true {
// CHECK-NEXT:    %q = fx.placeholder @q
// CHECK-NEXT:    %sdpa = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {scale = 0.25} :
// CHECK-NEXT:    fx.output((%sdpa,))

// -----

// Llama's causal-and-padding mask with no padding, shared by two layers; the mask is the
// fourth positional argument of the second.
fx.graph @causal {
  %q = fx.placeholder @q : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %kv = fx.call_function @torch.arange(8) {device = cpu} : i64[8][1]cpu
  %cols = fx.call_function @operator.getitem(%kv, (none, @builtins.slice(none, none, none))) : i64[1, 8][8, 1]cpu
  %rows = fx.call_function @operator.getitem(%kv, (@builtins.slice(none, none, none), none)) : i64[8, 1][1, 1]cpu
  %le = fx.call_function @operator.le(%cols, %rows) : b8[8, 8][8, 1]cpu
  %pad = fx.call_function @torch.ones(8) {dtype = @torch.bool} : b8[8][1]cpu
  %mask = fx.call_function @operator.and_(%le, %pad) : b8[8, 8][8, 1]cpu
  %one = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %mask} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %two = fx.call_function @torch._C._nn.scaled_dot_product_attention(%one, %one, %one, %mask) : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  fx.output((%two,))
}
// CHECK-LABEL: fx.graph @causal {
// CHECK-NEXT:    %q = fx.placeholder @q
// CHECK-NEXT:    %one = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {is_causal = true} :
// CHECK-NEXT:    %two = fx.call_function @torch._C._nn.scaled_dot_product_attention(%one, %one, %one) {is_causal = true} :
// CHECK-NEXT:    fx.output((%two,))

// -----

// An additive causal mask, -inf above the diagonal.
fx.graph @additive {
  %q = fx.placeholder @q : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %full = fx.call_function @torch.full((8, 8), -inf) : f32[8, 8][8, 1]cpu
  %mask = fx.call_function @torch.triu(%full) {diagonal = 1} : f32[8, 8][8, 1]cpu
  %sdpa = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %mask} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  fx.output((%sdpa,))
}
// CHECK-LABEL: fx.graph @additive {
// CHECK-NEXT:    %q = fx.placeholder @q
// CHECK-NEXT:    %sdpa = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {is_causal = true} :

// -----

// Masks that stay: a band, one that reads an input, one of random numbers.
fx.graph @kept {
  %q = fx.placeholder @q : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %pad = fx.placeholder @pad : b8[2, 1, 1, 8][8, 8, 8, 1]cpu
  %ones = fx.call_function @torch.ones(8, 8) {dtype = @torch.bool} : b8[8, 8][8, 1]cpu
  %band = fx.call_function @torch.tril(%ones) {diagonal = 2} : b8[8, 8][8, 1]cpu
  %a = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %band} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %b = fx.call_function @torch._C._nn.scaled_dot_product_attention(%a, %a, %a) {attn_mask = %pad} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %rand = fx.call_function @torch.rand(8, 8) : f32[8, 8][8, 1]cpu
  %coin = fx.call_function @operator.ge(%rand, 0.0) : b8[8, 8][8, 1]cpu
  %c = fx.call_function @torch._C._nn.scaled_dot_product_attention(%b, %b, %b) {attn_mask = %coin} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  fx.output((%c,))
}
// CHECK-LABEL: fx.graph @kept {
// CHECK:         %band = fx.call_function @torch.tril(%ones) {diagonal = 2}
// CHECK-NEXT:    %a = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %band}
// CHECK-NEXT:    %b = fx.call_function @torch._C._nn.scaled_dot_product_attention(%a, %a, %a) {attn_mask = %pad}
// CHECK-NEXT:    %rand = fx.call_function @torch.rand(8, 8)
// CHECK-NEXT:    %coin = fx.call_function @operator.ge(%rand, 0.0)
// CHECK-NEXT:    %c = fx.call_function @torch._C._nn.scaled_dot_product_attention(%b, %b, %b) {attn_mask = %coin}

// -----

// A mask written in place stays: its own node computes zeros, and the `fill_` of a view of it
// (the same storage) makes it another mask.
fx.graph @written {
  %q = fx.placeholder @q : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %m = fx.call_function @torch.zeros(8, 8) : f32[8, 8][8, 1]cpu
  %v = fx.call_function @operator.getitem(%m, (@builtins.slice(none, none, none), @builtins.slice(4, none, none))) : f32[8, 4][8, 1]cpu
  %fill_ = fx.call_method @fill_(%v, -inf) : f32[8, 4][8, 1]cpu
  %sdpa = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %m} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  fx.output((%sdpa,))
}
// CHECK-LABEL: fx.graph @written {
// CHECK:         %fill_ = fx.call_method @fill_(%v, -inf)
// CHECK-NEXT:    %sdpa = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %m}

// -----

// Names fx renames on export (`%input` is `input_1` there) are matched up by position.
fx.graph @renamed {
  %q = fx.placeholder @q : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %input = fx.call_function @torch.ones(8, 8) {dtype = @torch.bool} : b8[8, 8][8, 1]cpu
  %sum = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) {attn_mask = %input} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  %list = fx.call_function @torch._C._nn.scaled_dot_product_attention(%sum, %sum, %sum) {attn_mask = %input} : f32[2, 4, 8, 16][512, 128, 16, 1]cpu
  fx.output((%list,))
}
// CHECK-LABEL: fx.graph @renamed {
// CHECK-NEXT:    %q = fx.placeholder @q
// CHECK-NEXT:    %sum = fx.call_function @torch._C._nn.scaled_dot_product_attention(%q, %q, %q) :
// CHECK-NEXT:    %list = fx.call_function @torch._C._nn.scaled_dot_product_attention(%sum, %sum, %sum) :
// CHECK-NEXT:    fx.output((%list,))
