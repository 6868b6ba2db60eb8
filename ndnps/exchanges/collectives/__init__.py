"""PS-less all-reduce, sans-I/O (docs/collectives.md):

    schedules  who sends which part of the gradient to whom: the ring's and BCube's schedules
    allreduce  one peer's side of one all-reduce: what it serves and fetches at each step
"""
