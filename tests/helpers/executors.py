"""Job executors for tests: submitit's interface without its processes."""

from __future__ import annotations


class Inline:
    """An executor with submitit's interface that runs each submitted call at once, in this process."""

    class Done:
        def __init__(self, fn, args):
            self.job_id = "inline"
            try:
                self.value, self.error = fn(*args), None
            except Exception as exc:
                self.value, self.error = None, exc

        def done(self):
            return True

        def result(self):
            if self.error is not None:
                raise self.error
            return self.value

    def __init__(self):
        self.keys: list[str] = []  # the key of each submitted campaign job, in order

    def submit(self, fn, *args):
        if len(args) > 2 and hasattr(args[2], "key"):  # run_job(campaign, root, job, ...)
            self.keys.append(args[2].key)
        return Inline.Done(fn, args)
