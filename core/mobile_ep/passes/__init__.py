"""The stages of ``check`` and ``convert``, one per module, in the order :mod:`mobile_ep.pipeline` runs them.

``load`` (validate, then the model as an onnxruntime session sees it), ``fix_shapes``, ``fold_constants``
(onnxruntime's basic level), ``legalize`` (with the rewrite library, ``rewrites``), ``partition``,
``fuse_cpu`` (onnxruntime's fusions for the nodes no backend keeps), ``export`` (ONNX and ORT format),
``to_epcontext`` (compiled partitions) and ``verify``.  Model-to-model stages are onnx_ir passes
(``ir.passes.PassBase``) whose results stay on the pass object for the reports.
"""
