from .inf_vit import InfViT

__all__ = ['InfViT']
