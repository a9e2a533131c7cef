"""The generator's per-kind pieces of source: torch's hook signatures, registrations, notes and the header."""

# Per engine kind (global ones without their prefix; torch's hook signature is the kind's row, Kind.parameters):
# the value an edit replaces (and the hook returns), and the named tensors the explorer records.
EDITABLE = {
    "forward_pre": "args",
    "forward": "output",
    "backward_pre": "grad_output",
    "backward": "grad_input",
    "legacy_backward": "grad_input",
    "node_pre": "grad_outputs",
    "node": "grad_inputs",
}
TENSORS = {
    "forward_pre": '_named("args", args)',
    "forward": '_named("output", output)',
    "backward_pre": '_named("grad_output", grad_output)',
    "backward": '{**_named("grad_output", grad_output), **_named("grad_input", grad_input)}',
    "legacy_backward": '{**_named("grad_output", grad_output), **_named("grad_input", grad_input)}',
    "grad": "{name: grad}",  # name: grad_output, grad_output.0, ... after the output tensors
    "param_grad": '{"grad": grad}',
    "post_accumulate": '{"grad": param.grad} if param.grad is not None else {}',
    "node_pre": '_named("grad_output", grad_outputs)',
    "node": '{**_named("grad_output", grad_outputs), **_named("grad_input", grad_inputs)}',
}
MODULE_REGISTER = {
    "forward_pre": "register_forward_pre_hook({fn}{kwargs})",
    # always_call: a forward that raises still reports (output None), as in the explorer
    "forward": "register_forward_hook({fn}{kwargs}, always_call=True)",
    "backward_pre": "register_full_backward_pre_hook({fn})",
    "backward": "register_full_backward_hook({fn})",
    "legacy_backward": "register_backward_hook({fn})",
    "grad": "register_forward_hook({fn})",
    "param_grad": "register_hook({fn})",
    "post_accumulate": "register_post_accumulate_grad_hook({fn})",
}
GLOBAL_REGISTER = {  # on each module of the model, first among its hooks: where torch runs its global hooks
    "global_forward_pre": "register_forward_pre_hook({fn}, prepend=True{kwargs})",
    "global_forward": "register_forward_hook({fn}, prepend=True, always_call=True)",
    "global_backward_pre": "register_full_backward_pre_hook({fn}, prepend=True)",
    "global_backward": "register_full_backward_hook({fn}, prepend=True)",
    "global_grad": "register_forward_hook({fn}, prepend=True)",
}

HEADER = """\
# Plain-PyTorch version of {count} hook(s) made with hookwidgets; needs only torch and the model in `{model}`.
# captures[(path, kind)] lists what each hook recorded, oldest first; to remove every hook:
#     for handle in handles:
#         handle.remove()
{skipped}{imports}from collections import defaultdict

import torch

"""
# After the op-node helpers: the two global module hooks that log which module runs (no template holds a
# registration, so that importing one registers nothing).
SCOPE_HOOKS = """\
handles.append(torch.nn.modules.module.register_module_forward_pre_hook(_scope_pre))
handles.append(torch.nn.modules.module.register_module_forward_hook(_scope_post, always_call=True))"""

DICT_OUTPUT_NOTE = "# torch never fires the pre-hook above on a dict or dataclass output: then tensor hooks call it"

GRAD_NOTE = """\
# A forward hook arms a tensor hook on each output that requires grad: unlike a full backward hook, this
# works when a module changes its output in place. Tensor hooks armed by a forward that already ran stay
# on that forward's graph after the handles are removed."""

LEGACY_NOTE = """\
# register_backward_hook is deprecated (torch warns): on a module made of several autograd ops it sees the
# gradients of the last op only (for Linear: bias, input and weight of addmm), not the module's inputs, and
# once used, the module refuses full backward hooks even after removal. Here only for comparison: use
# register_full_backward_hook (kind 'backward') or a tensor hook on the output (kind 'grad')."""

NODE_NOTE = """\
# The parameter's AccumulateGrad node, where its gradient is added to .grad (the spot Horovod hooks to
# start communication early). torch holds this node only weakly: `kept` keeps it, and so its hook, alive."""

NODE_REGISTER = """\
_param = {model}.get_parameter({param})
kept.append(_param.view_as(_param).grad_fn.next_functions[0][0])  # the parameter's AccumulateGrad node
handles.append(kept[-1].{method}({fn}))"""

PLACEHOLDER = """\
def {fn}({signature}):
    # replace with your hook `{name}`: the explorer cannot turn arbitrary Python code into source,
    # so this placeholder with torch's signature does nothing.
    return None"""

# Put before a global_backward registration, inside the loop over every module (hence the indents).
GLOBAL_BACKWARD_SKIP = """\
if _module._is_full_backward_hook is False:
        continue  # a legacy backward hook is on it: torch refuses a full one beside it
    """

PATCHES = """\
# The tensors the replace and mean_ablate edits put in (mean_ablate: the record's mean over dim 0, a batch of one).
# Code cannot hold their values: bind `patches` to them, in this order, before running this code, e.g.
# patches = [record.tensor]. Their shapes: {shapes}.
if len(patches) != {count}:
    raise ValueError(f"patches holds {{len(patches)}} tensors; the edits below take {count} (shapes {shapes})")"""
