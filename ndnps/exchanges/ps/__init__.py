"""The PS's protocol, sans-I/O (peers reuse its update rule and member records):

    collector   when to ask a producer for its object and how long an Interest may be held
                (the finish-time estimate)
    membership  the workers of a training: assignment, loss, rejoin as one state table
    update      the rule that turns gradients into the next parameters (sync average, async
                apply), pluggable as ps-lite's set_request_handle
"""
