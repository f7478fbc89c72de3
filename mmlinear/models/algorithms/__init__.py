"""Training algorithms (models that wrap backbones), registered into ``MODELS``."""
from .veca_distill_loss import VECADistillLoss
from .veca_distiller import VECADistiller

__all__ = ['VECADistillLoss', 'VECADistiller']
