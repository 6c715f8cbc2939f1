"""Reverse post-order: the baseline order of most compilers (and of MAGIS's released code)."""

from __future__ import annotations

from .dag import Dag


def rpo_order(dag: Dag) -> list[int]:
    """Depth-first from the source ops along successor edges (in op order); post-order reversed."""
    seen = [False] * dag.n
    post = []
    for root in range(dag.n):
        if dag.preds[root] or seen[root]:
            continue
        seen[root] = True
        stack = [(root, iter(dag.succs[root]))]
        while stack:  # iterative: graphs of a few hundred ops would hit the recursion limit
            v, it = stack[-1]
            nxt = next((s for s in it if not seen[s]), None)
            if nxt is None:
                post.append(v)
                stack.pop()
            else:
                seen[nxt] = True
                stack.append((nxt, iter(dag.succs[nxt])))
    return post[::-1]


def schedule(dag: Dag) -> tuple[list[int], int, dict]:
    order = rpo_order(dag)
    return order, dag.peak(order), {"scheduler": "rpo"}
