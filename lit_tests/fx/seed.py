# RUN: %python %s | filecheck %s
# The seed example captured by Dynamo: placeholders, operator.add, relu, operator.mul, sum(dim=-1).
import torch

import mind


def fn(a, b, c):
    return ((a + b) * c.relu()).sum(dim=-1)


a, b, c = (torch.randn(4, 128) for _ in range(3))
print(mind.capture(fn, a, b, c))

# CHECK: fx.graph @graph0 {guards = [{{.*}}"TENSOR_MATCH: L['a']"{{.*}}]} {
# CHECK-NEXT: %l_a_ = fx.placeholder @L_a_ : f32[4, 128][128, 1]cpu
# CHECK-NEXT: %l_b_ = fx.placeholder @L_b_ : f32[4, 128][128, 1]cpu
# CHECK-NEXT: %l_c_ = fx.placeholder @L_c_ : f32[4, 128][128, 1]cpu
# CHECK-NEXT: %add = fx.call_function @operator.add(%l_a_, %l_b_) : f32[4, 128][128, 1]cpu
# CHECK-NEXT: %relu = fx.call_method @relu(%l_c_) : f32[4, 128][128, 1]cpu
# CHECK-NEXT: %mul = fx.call_function @operator.mul(%add, %relu) : f32[4, 128][128, 1]cpu
# CHECK-NEXT: %sum_1 = fx.call_method @sum(%mul) {dim = -1} : f32[4][1]cpu
# CHECK-NEXT: fx.output((%sum_1,))
# CHECK-NEXT: }
