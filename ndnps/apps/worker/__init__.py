"""A worker ("GPU"), `python -m ndnps.apps.worker` (__main__: the program, the task) and its
parts:

    job           one accepted training: setup, resync, the training loops
    join          fetching the training content
    registration  `*insert*`, its refresh, `*remove*`
    gradients     the gradient computed, collects answered or held
    receiver      the pushed versions: the Subscriber's asyncio adapter
    faults        fault injection for tests
"""
