"""The progress lines a run prints while it measures, one case after the other."""


class CaseProgress:
    """The lines of one case: its heading, `[INDEX/TOTAL] LABEL`, then every line of its measurement
    (workers, rounds, the head-vs-base rule, a confirmation) under it. Each line a case prints goes
    through here, so that what frames a case's lines belongs here too."""

    def __init__(self, write, index, total):
        self.write = write
        self.prefix = f"[{index}/{total}]"

    def heading(self, label):
        self.write(f"{self.prefix} {label}")

    def __call__(self, message):
        self.write(f"{self.prefix}   {message}")
