"""mind's own decomposition rules (ATen to ATen), which to-aten puts over torch's table: for ops
whose rule one torch has and another lacks (torch 2.11 has none of these; 2.14 has a global adaptive
max pooling rule and a 2-d max pooling backward), so that they reach mind's lowerings the same way
on each; for ops whose Inductor rule applies only where Inductor's backend generates Triton
(masked_scatter), which mind does on every device; for ops whose torch rule stops tracing (take, of
a 0-d index: it replaces torch's rule); and for ops that run faster split (a convolution's bias),
apart (the foreach ops, each tensor's chain fused), as a matmul (a convolution of patches, or of few
input channels), or over fewer rows (a 16-bit embedding's gradient, which replaces torch's rule too,
with the same sums and rounding, and hands the cases it does not speed up back to torch's), and
for views at a negative symbolic position, which the graph otherwise keeps unwrapped. A
package (as `lowerings/`), so that importing the passes loads no torch: to-aten imports it when it
builds its table. One module per family, each with its `RULES`."""

from . import convolution, embedding, foreach, gather, pooling, scatter, views

#: op overload -> mind's rule
RULES = {
    **convolution.RULES,
    **embedding.RULES,
    **foreach.RULES,
    **gather.RULES,
    **pooling.RULES,
    **scatter.RULES,
    **views.RULES,
}
