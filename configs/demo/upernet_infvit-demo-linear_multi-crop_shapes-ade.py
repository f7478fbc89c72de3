# Demo: the Linear-InfViT UperNet of upernet_infvit-demo-linear_shapes-ade.py trained with the
# demo's multi-crop recipe (../_base_/demo_multi-crop_recipe.py): crops of several sizes (128,
# 192 and 256 px, one drawn per sample) cut at the native scale from larger continuous scenes,
# so that it sees more context than one 128-pixel scene, as whole-image inference on a large
# raster does (docs/large_images.md, "Sixth measurement"). Same iterations, batch and schedule
# as the base config: the same number of samples, each padded to the batch's largest crop
# (256 px in most batches), so about four times its pixels per iteration. Validated on the
# 128-pixel ade split.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_infvit-demo-linear_shapes-ade.py', '../_base_/demo_multi-crop_recipe.py']

model = dict(
    data_preprocessor={{_base_.multi_crop_data_preprocessor}},
    decode_head=dict(loss_decode={{_base_.padded_loss_decode}}),
    auxiliary_head=dict(loss_decode={{_base_.padded_loss_decode}}))
train_dataloader = dict(dataset={{_base_.multi_crop_train_dataset}})
