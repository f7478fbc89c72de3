# Frozen DINOv3 ViT-B/16 (the VECA distillation's teacher, through timm) linear probe on
# ImageNet-1K: the baseline of VECA-B's frozen-backbone ImageNet result. Everything but the
# backbone is ./veca-base_linear-probe_8xb2048-coslr-90e_in1k.py: the class token after the
# final norm (where VECA-B gives its global token) through a BatchNorm neck and a linear head,
# mmpretrain's MAE linear-probe recipe (LARS lr 6.4 at 8 x 2048, 10-epoch warm-up, cosine
# over 90 epochs, no weight decay, fp16 AMP), ImageNet mean / std as DINOv3 normalises.
# The VECA paper reports 83.56 top-1 for this baseline (against 81.93 for VECA-B) but not its
# probe protocol: this is VECA-B's probe, so the two differ in the backbone alone.
# The weights: configs/veca/README.md, "teacher".
_base_ = [
    './veca-base_linear-probe_8xb2048-coslr-90e_in1k.py', '../_base_/frozen_dense_backbones.py'
]

model = dict(backbone={{_base_.dinov3_vitb16_frozen_cls_token}})
