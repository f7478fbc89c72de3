"""The VECA feature-distillation loss (the reference's ``veca/losses.py``)."""
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmlinear.registry import MODELS


@MODELS.register_module()
class VECADistillLoss(nn.Module):
    """Cosine loss on the global token plus cosine and MSE losses on the patch tokens.

    ``L = mean_b(1 - cos(g_s, t_cls))
    + dense_weight * (mean_{b,n}(1 - cos(z_s, t_n)) + mse_weight * MSE(z_s, t))``,
    computed in float32 (autocast off), cosine eps 1e-6, the MSE on the raw (un-normalised)
    features averaged over every element, as the reference ``veca/losses.py``. The three terms
    are returned separately so the logger shows each; their sum is ``L``.

    Args:
        dense_weight (float): ``w_dense``, weight of both patch terms. Defaults to 1.0.
        mse_weight (float): ``lambda_mse``, weight of the MSE inside the patch term.
            Defaults to 1.0.
        eps (float): Cosine-similarity eps. Defaults to 1e-6.
    """

    def __init__(self,
                 dense_weight: float = 1.0,
                 mse_weight: float = 1.0,
                 eps: float = 1e-6) -> None:
        super().__init__()
        for name, value in (('dense_weight', dense_weight), ('mse_weight', mse_weight)):
            if value < 0:
                raise ValueError(f'{name} must be >= 0, got {value}')
        self.dense_weight = dense_weight
        self.mse_weight = mse_weight
        self.eps = eps

    def forward(self, student_global: Tensor, student_patches: Tensor, teacher_cls: Tensor,
                teacher_patches: Tensor) -> Dict[str, Tensor]:
        """Args:
            student_global (Tensor): (B, D) the student's global token (core 0).
            student_patches (Tensor): (B, N, D) the student's patch tokens.
            teacher_cls (Tensor): (B, D) the teacher's CLS token after its final norm.
            teacher_patches (Tensor): (B, N, D) the teacher's patch tokens after its final
                norm, register tokens dropped.

        Returns:
            dict[str, Tensor]: Scalars ``loss_global``, ``loss_patch_cos``,
            ``loss_patch_mse``.
        """
        if student_global.shape != teacher_cls.shape or \
                student_patches.shape != teacher_patches.shape:
            raise ValueError(
                f'student and teacher features must have equal shapes, got global '
                f'{tuple(student_global.shape)} vs {tuple(teacher_cls.shape)} and patches '
                f'{tuple(student_patches.shape)} vs {tuple(teacher_patches.shape)}')
        # bf16/fp16 cosines and squared errors of ~1e-3 differences lose most of their bits.
        with torch.autocast(device_type=student_global.device.type, enabled=False):
            g_s, z_s = student_global.float(), student_patches.float()
            t_cls, t_z = teacher_cls.float(), teacher_patches.float()
            loss_global = (1 - F.cosine_similarity(g_s, t_cls, dim=-1, eps=self.eps)).mean()
            patch_cos = (1 - F.cosine_similarity(z_s, t_z, dim=-1, eps=self.eps)).mean()
            patch_mse = F.mse_loss(z_s, t_z)
        return dict(
            loss_global=loss_global,
            loss_patch_cos=self.dense_weight * patch_cos,
            loss_patch_mse=self.dense_weight * self.mse_weight * patch_mse)
