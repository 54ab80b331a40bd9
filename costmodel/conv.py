"""Convolutional layers: parameters, output side, receptive field, ResNet-18 (001 ch. 0–1).

Shapes follow PyTorch's Conv2d: a layer has c_out filters of shape c_in×k×k, slid over
an H×H input (padded by p on each side) with stride s.
"""

from __future__ import annotations

from collections.abc import Iterator

from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError, count, register_arguments

register_arguments(
    {"n_classes": count("output classes of a classifier", sample=(2, 1000), log=True)}
)

_STACK = {"n_layers": count("stacked convolutional layers L (stride 1)", sample=(1, 20))}
_CHANNELS = count("channels c in and out of every layer", sample=(1, 1024), log=True)


@formula("001 ch. 1, def 1.7; 001 Ex. 8(a)", "")
def conv_param_count(
    kernel_size: int, in_channels: int, out_channels: int, biases: bool = False
) -> float:
    """Parameters of a k×k convolution: k²·c_in·c_out, + c_out with biases (one per filter)."""
    weights = kernel_size**2 * in_channels * out_channels
    return weights + out_channels if biases else weights


@derivation(conv_param_count, fixed={"biases": True})
def _(sp):
    """k²c_in c_out + c_out: c_out filters, each a c_in×k×k block of weights and one bias."""
    k, c_in, c_out = sp.symbols("kernel_size in_channels out_channels", positive=True, integer=True)
    i, j = sp.symbols("i j", integer=True)
    per_filter = sp.summation(sp.summation(c_in, (i, 1, k)), (j, 1, k)) + 1  # k×k taps of c_in
    return c_out * per_filter, k**2 * c_in * c_out + c_out


@formula("001 ch. 0 (convolution: output size); 001 ch. 1, def 1.7", "")
def conv_output_size(input_size: int, kernel_size: int, padding: int = 0, stride: int = 1) -> int:
    """Output side of a convolution: ⌊(H + 2p − k)/s⌋ + 1."""
    span = input_size + 2 * padding - kernel_size  # room left for the window to move
    if span < 0:
        raise ArgumentError(
            f"conv.conv_output_size: kernel_size = {kernel_size} is larger than the padded input "
            f"H + 2p = {input_size + 2 * padding} (pad more or use a smaller kernel)"
        )
    return span // stride + 1


def _exact_stride(v: dict) -> bool:
    span = v["input_size"] + 2 * v["padding"] - v["kernel_size"]
    return span >= 0 and span % v["stride"] == 0


@derivation(conv_output_size, where=_exact_stride)
def _(sp):
    """(H + 2p − k)/s + 1 (floor dropped where s divides): the window starts at 0, s, 2s, ..."""
    H, k, p, s = sp.symbols("input_size kernel_size padding stride", positive=True)
    j, i = sp.symbols("j i")
    last = sp.solve(sp.Eq(j * s + k, H + 2 * p), j)[0]  # last start: window ends at the edge
    positions = sp.summation(1, (i, 0, last))  # starts 0, 1, ..., last (in units of s)
    return positions, (H + 2 * p - k) / s + 1


@formula("001 ch. 0 (receptive field); 001 Ex. 8(a)", "", domains=_STACK)
def receptive_field(n_layers: int, kernel_size: int) -> int:
    """Receptive field side of L stacked k×k convolutions with stride 1: 1 + L(k − 1)."""
    return 1 + n_layers * (kernel_size - 1)


@derivation(receptive_field)
def _(sp):
    """1 + L(k − 1) by induction: one pixel sees itself, each layer widens the patch by k − 1."""
    L, k = sp.symbols("n_layers kernel_size", positive=True, integer=True)
    l = sp.symbols("l", integer=True)
    return 1 + sp.summation(k - 1, (l, 1, L)), 1 + L * (k - 1)


@formula("001 Ex. 8(a) (27c² vs 49c²)", "", domains={**_STACK, "channels": _CHANNELS})
def stacked_conv_weights(n_layers: int, kernel_size: int, channels: int) -> float:
    """Weights of L stacked k×k convolutions with c channels in and out, no bias: L·k²·c²."""
    return n_layers * conv_param_count(kernel_size, channels, channels)


@formula("001 Ex. 8(a) (three 3×3 layers: 27/49 of one 7×7)", "", domains=_STACK)
def stacked_kernel_weight_ratio(n_layers: int, kernel_size: int) -> float:
    """Stacked over single-kernel weights at equal receptive field: Lk²/(1 + L(k − 1))².

    Three 3×3 layers need 27c² weights where one 7×7 layer needs 49c².
    """
    side = receptive_field(n_layers=n_layers, kernel_size=kernel_size)
    return n_layers * kernel_size**2 / side**2


@derivation(stacked_kernel_weight_ratio)
def _(sp):
    """Lk²/(1 + L(k − 1))²: the stack's L·k²c² weights over one kernel as wide as its field."""
    L, k, c = sp.symbols("n_layers kernel_size channels", positive=True, integer=True)
    l = sp.symbols("l", integer=True)
    stack = sp.summation(k**2 * c * c, (l, 1, L))  # L layers of c_out×c_in×k×k
    side = 1 + sp.summation(k - 1, (l, 1, L))  # receptive field of the stack
    single = side**2 * c * c  # one c×c convolution with a side×side kernel
    return stack / single, L * k**2 / (1 + L * (k - 1)) ** 2


@formula(
    "001 ch. 1, def 1.7 (cost of a convolution)",
    "FLOP",
    domains={"output_size": count("output side H' (pixels)", sample=(1, 256))},
)
def conv_flops(kernel_size: int, in_channels: int, out_channels: int, output_size: int) -> float:
    """Forward FLOPs of a convolution on one image: 2·k²·c_in·c_out·H'² (multiply-add per tap)."""
    return 2 * kernel_size**2 * in_channels * out_channels * output_size**2


@derivation(conv_flops)
def _(sp):
    """2k²c_in c_out H'²: H'×H'×c_out outputs, each a dot product over k²c_in inputs."""
    k, c_in, c_out, Hp = sp.symbols(
        "kernel_size in_channels out_channels output_size", positive=True, integer=True
    )
    t = sp.symbols("t", integer=True)
    per_output = sp.summation(2, (t, 1, k * k * c_in))  # multiply-add per tap
    return Hp * Hp * c_out * per_output, 2 * k**2 * c_in * c_out * Hp**2


@formula(
    "001 ch. 1 (image analysis: 224×224×3 = 150 528 values)",
    "",
    domains={
        "height": count("image height (pixels)", sample=(8, 1024)),
        "width": count("image width (pixels)", sample=(8, 1024)),
        "channels": count("channels per pixel (3 for RGB)", sample=(1, 4)),
    },
)
def image_values(height: int, width: int, channels: int) -> float:
    """Values in an image (a dense layer's input width): H·W·C."""
    return height * width * channels


@formula("001 ch. 1 (batch normalisation)", "", domains={"channels": _CHANNELS})
def batchnorm_param_count(channels: int) -> float:
    """Parameters of a BatchNorm over c channels: 2c (gain and shift; running stats are buffers)."""
    return 2 * channels


# ResNet-18 (He et al. 2016, torchvision): four stages of two basic blocks.
_RESNET18_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (width, stride of first block)


def _resnet18_convs(in_channels) -> Iterator[tuple[int, object, int]]:
    """Every convolution of ResNet-18 as (k, c_in, c_out); each is followed by a BatchNorm."""
    yield 7, in_channels, 64  # stem, stride 2, then max-pool
    c_prev = 64
    for width, stride in _RESNET18_STAGES:
        for block in range(2):
            c_in = c_prev if block == 0 else width
            yield 3, c_in, width  # conv1 of the basic block
            yield 3, width, width  # conv2
            if block == 0 and (stride != 1 or c_prev != width):
                yield 1, c_in, width  # 1×1 projection shortcut (downsample)
        c_prev = width


@formula("001 ch. 0 (ResNet-18: 11 181 642 parameters for 10 classes); He et al. 2016", "")
def resnet18_param_count(n_classes: int = 1000, in_channels: int = 3) -> float:
    """Parameters of torchvision's ResNet-18: 3136·c_in + 11 167 104 + 513·classes.

    Twenty convolutions without bias, each followed by a BatchNorm (2c), and a 512→classes
    linear head with bias.
    """
    total = 0
    for k, c_in, c_out in _resnet18_convs(in_channels):
        total += conv_param_count(kernel_size=k, in_channels=c_in, out_channels=c_out)
        total += batchnorm_param_count(channels=c_out)
    return total + 512 * n_classes + n_classes  # fc: weight and bias


@derivation(resnet18_param_count)
def _(sp):
    """Sum of k²c_in c_out + 2c_out over the twenty conv+BN layers, plus the 513·classes head."""
    c_in, n = sp.symbols("in_channels n_classes", positive=True, integer=True)
    layers = sum(k * k * ci * co + 2 * co for k, ci, co in _resnet18_convs(c_in))
    return layers + 512 * n + n, 3136 * c_in + 11167104 + 513 * n
