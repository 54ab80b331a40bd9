"""Convolutions: parameters, output side, receptive field, ResNet-18 (001 ch. 0–1, Ex. 8)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, conv
from costmodel._registry import all_derivations
from costmodel.verify import check


def test_output_side_same_and_stride_2():
    # 001 ch. 0: a 32-pixel input, 3×3 filter, padding 1 keeps 32 at stride 1, halves to 16 at 2
    assert conv.conv_output_size(input_size=32, kernel_size=3, padding=1, stride=1) == 32
    assert conv.conv_output_size(input_size=32, kernel_size=3, padding=1, stride=2) == 16


def test_resnet_stem():
    # ResNet-18 stem on 224×224 ImageNet images: 7×7, stride 2, padding 3 → 112 (He et al. 2016)
    assert conv.conv_output_size(input_size=224, kernel_size=7, padding=3, stride=2) == 112


def test_exercise_8a_stacked_kernels():
    # 001 Ex. 8(a): three 3×3 layers see 7×7 pixels with 27c² weights instead of 49c²
    assert conv.receptive_field(n_layers=3, kernel_size=3) == 7
    c = 64
    assert conv.stacked_conv_weights(n_layers=3, kernel_size=3, channels=c) == 27 * c**2
    assert conv.conv_param_count(kernel_size=7, in_channels=c, out_channels=c) == 49 * c**2
    assert conv.stacked_kernel_weight_ratio(n_layers=3, kernel_size=3) == pytest.approx(27 / 49)


def test_conv_params_with_bias():
    # nn.Conv2d(3, 64, 7) has 7·7·3·64 + 64 = 9 472 parameters
    assert conv.conv_param_count(kernel_size=7, in_channels=3, out_channels=64, biases=True) == 9472


def test_resnet18_parameters():
    # 001 ch. 0: torchvision's resnet18(num_classes=10) prints 11 181 642 (≈ 11.2 million);
    # the ImageNet model (1000 classes) has 11 689 512 (torchvision's model card)
    assert conv.resnet18_param_count(n_classes=10) == 11_181_642
    assert conv.resnet18_param_count() == 11_689_512


def test_image_values_and_conv_flops():
    # 001 ch. 1: a 224×224 colour image has 150 528 values
    assert conv.image_values(height=224, width=224, channels=3) == 150_528
    # ResNet stem: 2·7²·3·64·112² ≈ 0.236 GFLOPs (118 M multiply-adds)
    flops = conv.conv_flops(kernel_size=7, in_channels=3, out_channels=64, output_size=112)
    assert flops == 2 * 118_013_952


def test_kernel_larger_than_padded_input_is_refused():
    with pytest.raises(ArgumentError, match="kernel_size"):
        conv.conv_output_size(input_size=4, kernel_size=7, padding=1)


@pytest.mark.parametrize("bad", [{"stride": 0}, {"padding": -1}, {"input_size": 0}])
def test_bad_arguments_are_refused_by_name(bad):
    args = {"input_size": 32, "kernel_size": 3, "padding": 1, "stride": 1, **bad}
    with pytest.raises(ArgumentError, match=next(iter(bad))):
        conv.conv_output_size(**args)


def test_resnet_needs_a_class():
    with pytest.raises(ArgumentError, match="n_classes"):
        conv.resnet18_param_count(n_classes=0)


@settings(max_examples=100)
@given(H=st.integers(1, 512), half=st.integers(0, 5))
def test_same_padding_keeps_the_side(H, half):
    k = 2 * half + 1  # odd kernel, padding (k − 1)/2, stride 1
    assert conv.conv_output_size(input_size=H, kernel_size=k, padding=half) == H


@settings(max_examples=100)
@given(H=st.integers(8, 512), k=st.integers(1, 11), p=st.integers(0, 5), s=st.integers(1, 4))
def test_output_side_shrinks_with_stride(H, k, p, s):
    assume(H + 2 * p >= k)
    out = conv.conv_output_size(input_size=H, kernel_size=k, padding=p, stride=s)
    assert conv.conv_output_size(input_size=H, kernel_size=k, padding=p, stride=s + 1) <= out
    # the last window fits in the padded input, one more stride would not
    assert (out - 1) * s + k <= H + 2 * p < out * s + k


@settings(max_examples=100)
@given(L=st.integers(1, 20), k=st.integers(2, 11))
def test_a_stack_is_never_heavier_than_one_kernel_of_its_field(L, k):
    assert conv.receptive_field(n_layers=L + 1, kernel_size=k) > conv.receptive_field(
        n_layers=L, kernel_size=k
    )
    assert conv.stacked_kernel_weight_ratio(n_layers=L, kernel_size=k) <= 1


@pytest.mark.parametrize(
    "derivation",
    [d for d in all_derivations() if d.formula.startswith("conv.")],
    ids=lambda d: d.formula,
)
def test_derivations(derivation):
    result = check(derivation)
    assert result.ok, result.detail
