# SPDX-License-Identifier: MIT
# torch.amp.grad_scaler.GradScaler as the bridge sees it: step(optimizer) calls optimizer.step()
# unless the gradients held inf/nan (skip=True here), update() runs every iteration.
class GradScaler:
    def __init__(self, launch):
        self.launch = launch

    def step(self, optimizer, skip=False):
        self.launch("unscale_fake")
        if not skip:
            optimizer.step()

    def update(self, new_scale: object = None) -> None:
        self.launch("scale_update_fake")
