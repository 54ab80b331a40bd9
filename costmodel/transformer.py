"""Parameters and FLOPs of the decoder-only transformer (000 ch. 0–1, 001 ch. 1).

Shapes follow the notes: L blocks of width d, a heads of width d/a, an MLP of width
4d, a vocabulary V tied between embedding and head.
"""

from __future__ import annotations

from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError, count


@formula("000 §0.1, Prop 0.2; 001 §1.2, prop 1.2 (biases); GPT-2 for n_ctx", "")
def param_count(
    n_layers: int, d_model: int, vocab: int, n_ctx: int = 0, biases: bool = False
) -> float:
    """Parameters of a decoder-only transformer: 12Ld² + Vd (tied head).

    ``biases=True`` adds 13d per block (the biases of the four attention and two MLP
    matrices, and two LayerNorms) and the final LayerNorm's 2d (001 prop 1.2);
    ``n_ctx`` adds learned positions n_ctx·d (GPT-2).
    """
    per_block = block_param_count(d_model=d_model, biases=biases)
    final_norm = 2 * d_model if biases else 0
    return n_layers * per_block + vocab * d_model + n_ctx * d_model + final_norm


@derivation(param_count, fixed={"biases": False})
def _(sp):
    """12Ld² + Vd + n_ctx·d from the blocks' matrices and the tied embedding."""
    L, d, V, n_ctx = sp.symbols("n_layers d_model vocab n_ctx", positive=True)
    attention = 4 * d * d  # W_Q, W_K, W_V, W_O: d×d each
    mlp = d * (4 * d) + (4 * d) * d  # up d×4d, down 4d×d
    derived = L * (attention + mlp) + V * d + n_ctx * d  # head tied to the embedding
    return derived, 12 * L * d**2 + V * d + n_ctx * d


@formula("000 §0.1, Prop 0.2; 001 §1.2, prop 1.2", "")
def block_param_count(d_model: int, biases: bool = False) -> float:
    """Parameters of one block: 12d² (attention 4d², MLP 8d²), + 13d with biases and norms."""
    weights = 12 * d_model**2
    return weights + 13 * d_model if biases else weights


@derivation(block_param_count, fixed={"biases": True})
def _(sp):
    """12d² + 13d: four d×d and two d×4d matrices, their biases, two LayerNorms."""
    d = sp.symbols("d_model", positive=True)
    attention = 4 * (d * d + d)  # Q, K, V, O with biases
    mlp = (d * 4 * d + 4 * d) + (4 * d * d + d)  # up (bias 4d) and down (bias d)
    norms = 2 * (2 * d)  # two LayerNorms, gain and shift
    return attention + mlp + norms, 12 * d**2 + 13 * d


@formula("000 §6.1 (GQA, Ainslie et al. 2023); 001 §5.1", "")
def attention_param_count(d_model: int, n_heads: int, n_kv_heads: int) -> float:
    """Attention weights with grouped-query attention: 2d² + 2d²·n_kv/a.

    Q and O stay d×d; K and V shrink to d×(n_kv·d/a).  n_kv = a is multi-head (4d²),
    n_kv = 1 is multi-query.
    """
    if n_heads % n_kv_heads:
        raise ArgumentError(
            f"transformer.attention_param_count: n_kv_heads = {n_kv_heads} must divide "
            f"n_heads = {n_heads}"
        )
    d_head = d_model / n_heads
    return 2 * d_model * d_model + 2 * d_model * (n_kv_heads * d_head)


@derivation(attention_param_count)
def _(sp):
    """2d² + 2d²·n_kv/a from the four projections with K, V on n_kv heads."""
    d, a, g = sp.symbols("d_model n_heads n_kv_heads", positive=True)
    d_head = d / a
    q = d * (a * d_head)
    k = v = d * (g * d_head)
    o = (a * d_head) * d
    return q + k + v + o, 2 * d**2 * (1 + g / a)


@formula("001 §5.3 (LLaMA's SwiGLU); Shazeer 2020", "")
def mlp_param_count(d_model: int, d_ff: int, gated: bool = False) -> float:
    """MLP weights: 2·d·d_ff, or 3·d·d_ff for a gated (SwiGLU) MLP with a gate matrix."""
    return (3 if gated else 2) * d_model * d_ff


_DIM = count("matrix dimension", sample=(1, 8192), log=True)


@formula("000 §0.2, matrix product", "FLOP", domains={"m": _DIM, "n": _DIM, "k": _DIM})
def matmul_flops(m: int, n: int, k: int) -> float:
    """FLOPs of an (m×k)·(k×n) product: 2mnk (one multiply and one add per term)."""
    return 2 * m * n * k


@derivation(matmul_flops)
def _(sp):
    """2mnk: mn outputs, each a k-term dot product (k multiplies, k−1 adds ≈ k)."""
    m, n, k = sp.symbols("m n k", positive=True, integer=True)
    i = sp.symbols("i", integer=True)
    per_output = sp.summation(2, (i, 1, k))  # a multiply-add per term
    return m * n * per_output, 2 * m * n * k


@formula("000 §1.1, Prop 1.1; 001 §1.3, thm 1.3", "FLOP")
def forward_flops_per_token(n_params: float) -> float:
    """Forward FLOPs per token: 2N (a multiply-add per weight)."""
    return 2 * n_params


@formula("000 §1.1, Prop 1.1; 001 §1.3, thm 1.3", "FLOP")
def training_flops(n_params: float, n_tokens: float) -> float:
    """Training FLOPs C = 6ND: forward 2N and backward 4N per token (000 Thm 0.4)."""
    return 6 * n_params * n_tokens


@derivation(training_flops)
def _(sp):
    """6ND: forward 2N per token, backward twice the forward (gradients wrt inputs and weights)."""
    N, D = sp.symbols("n_params n_tokens", positive=True)
    forward = 2 * N  # per token
    backward = 2 * forward  # one product for the input gradient, one for the weight gradient
    return (forward + backward) * D, 6 * N * D


@formula("001 §1.2, prop 1.2", "FLOP")
def block_flops_per_token(d_model: int, seq_len: int) -> float:
    """Forward FLOPs per token of one block: 24d² + 4nd (weights, then attention scores)."""
    return 24 * d_model**2 + 4 * seq_len * d_model


@derivation(block_flops_per_token)
def _(sp):
    """24d² + 4nd: 2 FLOPs per weight of the 12d² matrices, plus QKᵀ and PV over n keys."""
    d, n = sp.symbols("d_model seq_len", positive=True)
    weights = 2 * (4 * d * d + 8 * d * d)  # attention projections and MLP
    scores = 2 * n * d  # q·k for n keys, all heads together
    mix = 2 * n * d  # probabilities times V
    return weights + scores + mix, 24 * d**2 + 4 * n * d


@formula("000 §1.1, attention share", "")
def attention_flops_share(seq_len: int, d_model: int) -> float:
    """Attention-score FLOPs relative to the 24d² weight FLOPs per token: 4Td/(24d²) = T/(6d)."""
    return seq_len / (6 * d_model)


@derivation(attention_flops_share)
def _(sp):
    """T/(6d) from the two terms of the per-block count."""
    d, T = sp.symbols("d_model seq_len", positive=True)
    return (4 * T * d) / (24 * d**2), T / (6 * d)


@formula("000 §2.5 (after Prop 2.8); 001 §4.1", "")
def recomputation_overhead(extra_forwards: int = 1) -> float:
    """Extra compute of recomputation: each extra forward adds 1 to the 3 units of a step (1/3).

    A step is one forward and a backward of two forward units (000 Thm 0.4); full
    checkpointing recomputes one forward (+33 %), two-level checkpointing two (+67 %).
    """
    return extra_forwards / 3


@formula("000 §1.4, Thm 1.7 (Chinchilla)", "")
def tokens_per_param(n_params: float, n_tokens: float) -> float:
    """Tokens per parameter D/N (compute-optimal ≈ 20)."""
    return n_tokens / n_params


@formula("000 §0.1, Prop 0.2; 000 Ex. 1(a) (Vd = 0.10e9); GPT-2 for n_ctx", "")
def embedding_param_count(vocab: int, d_model: int, n_ctx: int = 0) -> float:
    """Embedding parameters (tied with the head): V·d, + n_ctx·d for learned positions."""
    return (vocab + n_ctx) * d_model


@formula("000 Ex. 13 (768 sequences of 2048 tokens ≈ 1.57e6 per step)", "")
def tokens_per_batch(batch: int, seq_len: int) -> float:
    """Tokens in one optimizer step's batch: b·s."""
    return batch * seq_len


@formula("001 ch. 0 (attention: at d_k = 64 the scores have std 8); Vaswani et al. 2017", "")
def attention_score_std(d_head: int) -> float:
    """Standard deviation of an unscaled score q·k with unit-variance entries: √d_k."""
    return d_head**0.5


@derivation(attention_score_std)
def _(sp):
    """√d_k: Var(Σ q_i k_i) = Σ Var(q_i)Var(k_i) = d_k for independent zero-mean unit entries."""
    d = sp.symbols("d_head", positive=True, integer=True)
    i = sp.symbols("i", integer=True)
    var_q = var_k = 1
    variance = sp.summation(var_q * var_k, (i, 1, d))  # independent terms: variances add
    return sp.sqrt(variance), sp.sqrt(d)
