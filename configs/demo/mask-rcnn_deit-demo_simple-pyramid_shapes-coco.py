# Demo: the DeiT baseline of the WeightFormer paper's COCO comparison at demo scale, on the
# bundled 128x128 COCO-format shapes: mmpretrain's VisionTransformer (softmax attention) with
# the WeightFormer demo's width, depth, MLP width and 16x16 patches, 4 heads as the DeiT
# classification demo, in place of WeightFormer; everything else as
# ./mask-rcnn_weightformer-demo_simple-pyramid_shapes-coco.py (neck, head, schedule, AdamW).
# Weight decay skips the norms, the biases, the position table and the class token, as DeiT
# trains. The ViT attends to the padding of a batch (it takes no padding mask).
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = [
    './mask-rcnn_weightformer-demo_simple-pyramid_shapes-coco.py', '../_base_/deit_variables.py'
]
custom_imports = dict(imports=['mmlinear.models', 'mmpretrain.models'], allow_failed_imports=False)

# Trained from scratch as the WeightFormer demo is: the stride-16 pyramid (strides 4 to 32).
model = dict(backbone={{_base_.deit_demo_dense_backbone}})

optim_wrapper = dict(paramwise_cfg={{_base_.deit_replacing_paramwise_cfg}})
