"""A faithful PyTorch eager baseline of the official Ahn et al. training step (SPEC §3.5):
rows are tokens, Z: (B, N+1, d+1); per layer the attention is computed in the reference's einsum
order (Z Q Zᵀ, then the activation if any — the official ``attention(P, Q, Z, activation)`` with
``torch.relu`` or a softmax over the keys — then the mask A, then P z), the loss is
((Z_L[:, N, d] + y)²).mean(); gradients of each d×d block are clipped separately;
AdamW(β = (0.99, 0.9), weight decay 0)."""

from __future__ import annotations

import torch

ACTIVATIONS = {"linear": None, "relu": torch.relu, "softmax": lambda a: torch.softmax(a, dim=-1)}


def attention(P: torch.Tensor, Q: torch.Tensor, Z: torch.Tensor, activation=None) -> torch.Tensor:
    """The reference's layer update for one head: P, Q are the trained d×d blocks."""
    B, N1, D = Z.shape
    d, N = D - 1, N1 - 1
    P_full = torch.zeros(D, D, dtype=Z.dtype)
    P_full[:d, :d] = P
    P_full[d, d] = 1
    Q_full = torch.zeros(D, D, dtype=Z.dtype)
    Q_full[:d, :d] = Q
    A = torch.eye(N1, dtype=Z.dtype)
    A[N, N] = 0
    attn = torch.einsum("BNi,ij,BMj->BNM", Z, Q_full, Z)
    if activation is not None:
        attn = activation(attn)
    key = torch.einsum("ij,BNj->BNi", P_full, Z)
    return torch.einsum("BNM,ML,BLi->BNi", attn, A, key) / N


def forward(allparam: torch.Tensor, Z: torch.Tensor, activation=None) -> torch.Tensor:
    """allparam: (L, H, 2, d, d) = (P block, Q block) per layer and head."""
    for layer in allparam:
        Z = Z + sum(attention(h[0], h[1], Z, activation) for h in layer)
    return Z


def loss_fn(allparam: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, activation=None) -> torch.Tensor:
    N, d = Z.shape[1] - 1, Z.shape[2] - 1
    return ((forward(allparam, Z, activation)[:, N, d] + y) ** 2).mean()


def prompt_tensor(X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Z with the query label zeroed, and the target, from rows X: (B, N+1, d) and labels y: (B, N+1)."""
    Z = torch.cat([X, y[:, :, None]], dim=2)
    Z[:, -1, -1] = 0
    return Z, y[:, -1].clone()


def sample(B: int, N: int, UD: torch.Tensor, UDinv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fresh prompts as in the official code: x = U D g, w* = U D⁻¹ g' (w* ~ N(0, Σ⁻¹))."""
    d = UD.shape[0]
    X = torch.randn(B, N + 1, d, dtype=UD.dtype) @ UD.T
    w = torch.randn(B, d, dtype=UD.dtype) @ UDinv.T
    return prompt_tensor(X, torch.einsum("bnd,bd->bn", X, w))


class Trainer:
    def __init__(self, allparam: torch.Tensor, lr: float, clip: float, activation: str = "linear"):
        self.allparam = allparam.clone().requires_grad_(True)
        self.activation = ACTIVATIONS[activation]
        self.opt = torch.optim.AdamW([self.allparam], lr=lr, betas=(0.99, 0.9), weight_decay=0.0)
        self.clip = clip

    def step(self, Z: torch.Tensor, y: torch.Tensor) -> float:
        self.opt.zero_grad()
        loss = loss_fn(self.allparam, Z, y, self.activation)
        loss.backward()
        with torch.no_grad():  # clip each d×d block's gradient to Frobenius norm ≤ clip
            g = self.allparam.grad
            norms = g.flatten(-2).norm(dim=-1)[..., None, None]
            g.mul_(torch.clamp(self.clip / norms.clamp_min(1e-30), max=1.0))
        self.opt.step()
        return float(loss.detach())
