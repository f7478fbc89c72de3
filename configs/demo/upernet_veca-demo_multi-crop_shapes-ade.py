# Demo: the VECA UperNet of upernet_veca-demo_shapes-ade.py trained with the demo's
# multi-crop recipe (../_base_/demo_multi-crop_recipe.py): crops of 128, 192 and 256 px cut at
# the native scale from larger continuous scenes, one per sample, so that it sees more context
# than one 128-pixel scene (docs/large_images.md, "Eighth measurement"). Same iterations,
# batch and schedule as the base config, about four times its pixels per iteration. Validated
# on the 128-pixel ade split; the head's window stays the 128-pixel crop's (4 cells).
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_veca-demo_shapes-ade.py', '../_base_/demo_multi-crop_recipe.py']

model = dict(
    data_preprocessor={{_base_.multi_crop_data_preprocessor}},
    decode_head=dict(loss_decode={{_base_.padded_loss_decode}}),
    auxiliary_head=dict(loss_decode={{_base_.padded_loss_decode}}))
train_dataloader = dict(dataset={{_base_.multi_crop_train_dataset}})
