from .infvit import InfViT
from .veca import VECA
from .weightformer import WeightFormer

__all__ = ['InfViT', 'VECA', 'WeightFormer']
