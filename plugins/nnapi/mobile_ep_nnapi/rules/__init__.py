"""NNAPI op rules, one module per op or op family (ORT's ``nnapi_builtin/builders/impl/*_op_builder.cc``).

Every concrete :class:`~mobile_ep_nnapi.rules._base.NnapiRule` subclass defined in a public module here
is registered by :meth:`mobile_ep.RuleRegistry.from_package`; private modules (``_base``, ``_quant``)
hold the shared checks.
"""

from mobile_ep_nnapi.rules._base import NnapiRule  # (the base every rule here derives from)

__all__ = ["NnapiRule"]
