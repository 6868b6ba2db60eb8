"""The parameter server, `python -m ndnps.apps.ps` (__main__: the program, its state, run and
end) and its parts:

    roster      the task's assignment; workers lost and back (around exchanges.ps.membership)
    content     each worker's training content
    collect     the collect Interests and their retries
    loops       the training loops, sync and async (the update rule makes the parameters)
    serving     the handlers under /<ps>, the parameters' publish and push, lingering
    checkpoint  a restarted PS resumes; the final model's file
"""
