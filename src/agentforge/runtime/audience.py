"""Whether another replica may be listening on the cluster's channel: a replica alone announces
none of its events (each would cost a NOTIFY round trip, sealing, and hearing it back for nothing).

Not knowing counts as being heard. A replica that starts greets the others (`hello`) and waits for
every live one to answer before it serves anyone; a replica hearing a greeting announces again from
that moment, before it answers, so the newcomer's subscribers miss nothing. Announcing stops only
on a count of the live replicas that found this one alone and that no greeting (or a gap in
listening, when one may have been missed) overtook: a newcomer joins the roster before it greets,
so a count started after its greeting was heard includes it.
"""

from __future__ import annotations


class Audience:
    def __init__(self) -> None:
        self.others = True  # unknown: announce
        self._greetings = 0

    def greeted(self) -> None:
        """Another replica said hello (or one may have, unheard): announce from now on."""
        self.others = True
        self._greetings += 1

    def counting(self) -> int:
        """Before counting the live replicas: the token `counted` checks for greetings since."""
        return self._greetings

    def counted(self, token: int, live: int) -> None:
        """A count of the live replicas (this one included), started at `token`."""
        if live <= 1 and token == self._greetings:
            self.others = False
