"""The one list of English stopwords: function words that carry no topic.

The text engine drops them from content words and stems; the local corpus index drops them from the
full-text query it builds (in an OR query they would match nearly every document). Contractions are
listed whole ("don't") for tokenizers that keep apostrophes, and their leftover pieces ("s", "t",
"ll", "re", "ve", "m") for tokenizers that split on them. Negations are stopwords too (neither bag
of words can use them); single letters other than those pieces (the "d" of "vitamin D") are not.
"""

from __future__ import annotations

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't done down during
    e.g each either else etc ever every few for from further get gets got had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm i've
    i.e if in into is isn't it it's its itself just let let's lets may me might more most much must mustn't my
    myself need neither no nor not now of off on once one only or other ought our ours ourselves out over own
    per please same shall shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those though
    through thus to too under until up upon us use used using very via vs was wasn't we we'd we'll we're we've
    were weren't what what's whats when when's where where's whether which while who who's whom whose why why's
    will with within without won't would wouldn't yet you you'd you'll you're you've your yours yourself
    yourselves
    s t ll re ve m
    """.split()
)
