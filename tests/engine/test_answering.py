"""Answer-first selection on small invented pages: question types and aspects, the lead sentence, yes/no
verdicts, how-to leads, second hops, pronouns, short answers and saying that the sources do not answer."""

from __future__ import annotations

from research_tool.engines.base import NumberedSource, SynthesisInput
from research_tool.engines.offline import OfflineEngine
from research_tool.engines.text.answering import asked_for, rank_candidates, select_answer
from research_tool.engines.text.candidates import build_candidates
from research_tool.engines.text.facts import is_declarative
from research_tool.engines.text.howto_answers import action_name_bonus, api_title_match, identifier_matched
from research_tool.engines.text.question_intent import classify_question
from research_tool.engines.text.short_answers import best_span
from research_tool.models.entities import SourceResult


def page(n: int, title: str, text: str) -> NumberedSource:
    return NumberedSource(
        n=n, source=SourceResult(url=f"file:///pages.jsonl#{n}", title=title, source_name="local", full_content=text)
    )


def test_question_types() -> None:
    assert classify_question("When did the Varn bridge open?").answer_type == "date"
    assert classify_question("Who designed the Varn bridge?").answer_type == "person"
    assert classify_question("How many arches does the Varn bridge have?").answer_type == "number"
    assert classify_question("Are the Varn bridge and the Tolt bridge both toll bridges?").answer_type == "yes_no"
    assert classify_question("How do I compress a folder with a password?").answer_type == "howto"


def test_the_sentence_with_a_date_leads_not_the_one_that_restates_the_question() -> None:
    sources = [
        page(
            1,
            "Varn bridge",
            "The Varn bridge is a stone bridge over the river Tolt. "
            "People often ask when the Varn bridge opened to traffic. "
            "The bridge opened to traffic in 1871 after nine years of work.",
        )
    ]
    selection = select_answer("When did the Varn bridge open to traffic?", sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("The bridge opened to traffic in 1871")
    assert selection.short_answer == "1871"


def test_a_question_about_something_the_sources_never_mention_is_not_answered() -> None:
    sources = [page(1, "Varn bridge", "The Varn bridge is a stone bridge over the river Tolt, opened in 1871.")]
    selection = select_answer("Which orchestra first performed the Quell symphony in Ostrava?", sources)
    assert not selection.answered and selection.short_answer is None


async def test_offline_report_says_not_answered_and_still_lists_what_was_found() -> None:
    sources = [page(1, "Varn bridge", "The Varn bridge is a stone bridge over the river Tolt, opened in 1871.")]
    request = SynthesisInput(
        query="Which orchestra first performed the Quell symphony in Ostrava?", sources=sources, facts=[]
    )
    draft = (await OfflineEngine().synthesize(request)).value
    assert draft.answered is False and draft.short_answer is None
    assert draft.answer.startswith("_The sources found do not answer this question.")
    assert "Varn bridge" in draft.answer  # what was found instead, cited
    assert "[1]" in draft.answer


def test_yes_no_same_attribute_verdicts_come_from_each_page() -> None:
    sources = [
        page(1, "Mara Quill", "Mara Quill (born 1950) is a Norwegian sculptor known for bronze birds."),
        page(2, "Teo Brandt", "Teo Brandt (born 1961) is a Norwegian painter of coastal scenes."),
        page(3, "Ilse Varga", "Ilse Varga (born 1972) is a Hungarian sculptor and teacher."),
    ]
    same = select_answer("Are Mara Quill and Teo Brandt of the same nationality?", sources)
    assert same.answered and same.verdict == "Yes" and same.short_answer == "yes"
    different = select_answer("Are Mara Quill and Ilse Varga of the same nationality?", sources)
    assert different.verdict == "No"


def test_yes_no_both_questions_check_each_page_for_the_predicate() -> None:
    sources = [
        page(1, "Quarry Lane", "Quarry Lane is a board game for two players published in 1988."),
        page(2, "Tin Harbor", "Tin Harbor is a card game about trading ships, published in 1990."),
        page(3, "Salt Roads", "Salt Roads is a board game about merchants, published in 1994."),
    ]
    assert select_answer("Are Quarry Lane and Salt Roads both board games?", sources).verdict == "Yes"
    assert select_answer("Are Quarry Lane and Tin Harbor both board games?", sources).verdict == "No"


def test_how_to_leads_with_the_call_signature_then_one_sentence_per_aspect() -> None:
    text = (
        "archiver.pack — Pack a folder into one archive file.\n\n"
        "archiver.pack(folder, target, password=None, level=6)\n\n"
        "Pack every file of folder into target. "
        "If password is given, the archive is encrypted with that password. "
        "The level argument sets the compression level from 0 to 9."
    )
    other = "uploader — Send files to a server.\n\nThe uploader module sends files over HTTP to a server."
    sources = [page(1, "archiver.pack — Pack a folder", text), page(2, "uploader — Send files", other)]
    selection = select_answer("How do I pack a folder into an archive with a password?", sources)
    assert selection.answered
    assert selection.sentences[0].statement == "archiver.pack(folder, target, password=None, level=6)"
    assert any("encrypted with that password" in c.statement for c in selection.sentences[1:])
    assert selection.short_answer == "archiver.pack(folder=..., password=...)"  # the parameters asked about


def test_a_diagram_line_that_starts_and_ends_with_calls_is_no_signature() -> None:
    text = (
        "wire — Talk to a server.\n\n"
        "  send() | | ( header() )* finish()\n\n"
        "wire.open(host, port=80)\n\n"
        "Open a connection to host and send requests over it."
    )
    selection = select_answer("How do I open a connection to a server?", [page(1, "wire — Talk to a server", text)])
    assert selection.answered
    assert selection.sentences[0].statement == "wire.open(host, port=80)"


def test_a_usage_example_is_no_call_signature() -> None:
    text = (
        "Tagging entries\n\n"
        'store.set(("invoice", 881), data, tags=("customer:41",))\n\n'
        "Call store.purge() to remove every entry in the store, expired or not."
    )
    docs = build_candidates([page(1, "Tagging entries", text)])
    assert docs[0].signature is None  # it passes values: an example of a call, not what the call declares
    declared = build_candidates([page(1, "wire", "wire.open(host, port=80, *, timeout=None)\n\nOpen a connection.")])
    assert declared[0].signature is not None
    assert declared[0].signature.statement == "wire.open(host, port=80, *, timeout=None)"


def test_a_long_sentence_ending_in_a_colon_and_a_sentence_listing_names_are_statements() -> None:
    assert is_declarative("The river Tolt passes through four provinces on its way to the northern sea:")
    assert not is_declarative("Parameters of the function:")
    assert is_declarative(
        "Anna, Bert, Carl, Dora, Emil and Frida founded the rowing club in 1901, and the club still races on the river."
    )
    assert not is_declarative("Functions in toolkit: alpha, beta, gamma, delta, epsilon, zeta, eta, theta.")


def test_how_to_leads_with_the_api_page_whose_name_spells_the_question_even_without_prose() -> None:
    sources = [
        page(
            1,
            "tarball.pack — Describe the usual layout of packed ZIP archives.",
            "tarball.pack — Describe the usual layout of packed ZIP archives.\n\ntarball.pack()\n\n"
            "Describe the usual layout of packed ZIP archives.",
        ),
        # a page holding only a signature and a member list: no prose, yet its name is the answer
        page(2, "tarball.ZipUnpacker", "tarball.ZipUnpacker\n\ntarball.ZipUnpacker(f, members=None)\n\n"),
    ]
    selection = select_answer("How do I unpack a ZIP?", sources)  # its name states the whole question
    assert selection.answered
    assert selection.sentences[0].statement == "tarball.ZipUnpacker(f, members=None)"
    assert selection.short_answer is not None and selection.short_answer.startswith("tarball.ZipUnpacker(")


def test_an_api_name_matches_the_words_it_abbreviates_or_contains() -> None:
    assert identifier_matched(["dictionary", "read"], "csvlib.DictReader") == {"dictionary", "read"}
    assert identifier_matched(["iso"], "dates.fromisoformat") == {"iso"}
    assert identifier_matched(["file"], "csvlib.DictReader") == frozenset()
    # only a how-to question looks at API names, and only a title that names an API counts
    assert api_title_match("How do I read a file into dictionaries?", "csvlib.DictReader") > 0.5
    assert api_title_match("Who read the dictionaries?", "csvlib.DictReader") == 0.0
    assert api_title_match("How do I read a file into dictionaries?", "Reading dictionaries") == 0.0


def short(question: str, sentence: str) -> str | None:
    """The best span the fitted span ranker reads from a one-sentence page's sentence (given as the short
    answer only when its gate passes)."""
    lead = build_candidates([page(1, "Notes", sentence)])[0].candidates[0]
    found = best_span(asked_for(classify_question(question)), lead.statement, 1.0, 1.0)
    return found.text if found is not None else None


def test_short_answer_takes_the_value_beside_the_question_words_not_the_first_one() -> None:
    # two dates: the one next to the question's words answers
    assert (
        short("When was the Tolt convention held?", "After the 1851 floods, the 1871 Tolt convention was held.")
        == "1871"
    )


def test_how_to_leads_with_the_api_named_for_the_action_asked() -> None:
    sources = [
        # explains more of the question's words, but its name is another action
        page(
            1,
            "loafkit.join — Return one loaf line from sliced bread parts.",
            "loafkit.join — Return one loaf line from sliced bread parts.\n\nloafkit.join(parts)\n\n"
            "Return one loaf line from sliced bread parts.",
        ),
        page(
            2,
            "loafkit.slice — Cut bread into parts.",
            "loafkit.slice — Cut bread into parts.\n\nloafkit.slice(bread, width=1)\n\nCut bread into parts.",
        ),
    ]
    selection = select_answer("How do I slice a loaf of bread into parts?", sources)
    assert selection.sentences[0].statement == "loafkit.slice(bread, width=1)"


def test_an_api_named_for_the_action_alone_gets_no_bonus() -> None:
    intent = classify_question("How do I slice a loaf of bread?")
    assert action_name_bonus(intent, "loafkit.slice", frozenset({"bread"})) > 0
    assert action_name_bonus(intent, "kitchen.Knife.slice", frozenset({"knife"})) == 0.0  # names no loaf or bread
    assert action_name_bonus(intent, "loafkit.join", frozenset({"bread"})) == 0.0


def test_a_how_to_question_never_weighs_the_language_as_an_api_term() -> None:
    assert "python" not in classify_question("How do I stop a Python program cleanly?").weights
    assert "python" in classify_question("Who designed Python?").weights


def test_after_the_leading_call_the_next_sentence_says_what_its_name_does_not() -> None:
    sources = [
        page(
            1,
            "ovenkit.bake_bread — Bake bread.",
            "ovenkit.bake_bread — Bake bread.\n\novenkit.bake_bread(dough, minutes=40)\n\nBake bread.",
        ),
        page(
            2,
            "ovenkit.SteamTray — A tray that keeps steam in the oven while the loaf rises.",
            "ovenkit.SteamTray — A tray that keeps steam in the oven while the loaf rises.\n\n"
            "ovenkit.SteamTray(volume)\n\nA tray that keeps steam in the oven while the loaf rises.",
        ),
    ]
    selection = select_answer("How do I bake bread with steam?", sources)
    assert selection.sentences[0].statement == "ovenkit.bake_bread(dough, minutes=40)"
    assert selection.sentences[1].n == 2  # "bake bread" is said by the name; steam is what is left


def test_short_answer_takes_any_name_for_who_even_one_the_name_finder_calls_a_place() -> None:
    # the name beside the question's words answers, whatever type the name finder gave it
    assert (
        short(
            "Who was the founder of the Tolt guild?",
            "The views of Mara Quell, founder of the Tolt guild, resembled those of Ivo Brandt, a harbour master.",
        )
        == "Mara Quell"
    )
    # a lone month is a time, never the person asked for
    assert (
        short(
            "Who produced the comedy Salt Roads?",
            "The network had new hits that year: in September, Salt Roads, produced by Ilse Varga, premiered.",
        )
        == "Ilse Varga"
    )


def test_the_head_noun_is_the_noun_a_capitalised_word_qualifies_and_no_verb() -> None:
    assert classify_question("Which Norwegian show changed the views of sailors?").head_noun == "show"
    assert classify_question("What came into force after the vote?").head_noun is None


def test_which_came_first_is_decided_by_each_option_own_page_year() -> None:
    sources = [
        page(1, "Salt Harbor", "Salt Harbor is a rock band from Tolt, formed in 2006 by Ann Lee."),
        page(2, "The Quills", "The Quills were a rock band from Varn, formed in 1997."),
        page(3, "Salt Harbor Live", "Salt Harbor Live is a concert album recorded in 1990 by a tribute band."),
    ]
    first = select_answer("Which band was formed first, The Quills or Salt Harbor?", sources)
    assert first.answered and first.short_answer is not None and "Quills" in first.short_answer
    assert first.sentences[0].statement.startswith("The Quills were")
    assert first.sentences[1].statement.startswith("Salt Harbor is")
    later = select_answer("Which band was formed later, The Quills or Salt Harbor?", sources)
    assert later.short_answer == "Salt Harbor" and later.sentences[0].statement.startswith("Salt Harbor is")


def test_a_choice_without_each_option_own_page_year_is_answered_as_usual() -> None:
    sources = [
        page(1, "Salt Harbor", "Salt Harbor is a rock band from Tolt, formed in 2006 by Ann Lee."),
        page(2, "The Quills", "The Quills were a rock band from Varn, known for long concerts."),
    ]
    selection = select_answer("Which band was formed first, The Quills or Salt Harbor?", sources)
    assert selection.answered and selection.sentences  # the usual lead, no verdict drawn from one year


def test_a_misspelt_question_word_still_matches_its_long_word() -> None:
    sources = [
        page(
            1,
            "Harbour history",
            "The harbour was built in 1850. The town finally won its independence on 3 May 1901 after a vote.",
        )
    ]
    intent = classify_question("When did independance come?")
    pool = rank_candidates(intent, build_candidates(sources))
    best = max(pool, key=lambda c: c.score)
    assert best.statement.startswith("The town finally won its independence")
    assert best.features["coverage"] > 0


def test_a_question_may_name_the_page_s_subject_by_its_initials() -> None:
    sources = [
        page(
            1,
            "Tolt River Authority",
            "The authority was set up by the county in 1931. Its board later moved the weir to protect salmon runs.",
        )
    ]
    selection = select_answer("Why did the TRA board move the weir?", sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("Its board later moved the weir")


def test_a_pronoun_that_cannot_stand_for_the_asked_kind_keeps_its_sentence_first() -> None:
    # "he" cannot stand for a country: the sentence that answers stays first
    sources = [
        page(
            1,
            "Rowing in Europe",
            "Teo Brandt studied the rowing clubs of twelve European countries in 1961. "
            "He found that Norway has the most rowing clubs per person.",
        )
    ]
    selection = select_answer("Which country has the most rowing clubs per person?", sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("He found that Norway")


def test_the_slot_is_after_the_content_word_before_a_wh_word_that_follows_a_preposition() -> None:
    # "... rather than what?": "than" names nothing, "rather" marks the slot
    assert (
        short(
            "Varn critics see the tolls as a cost of travel rather than what?",
            "Some Varn critics, writing in 1902, saw the tolls as a cost of travel rather than a source of revenue.",
        )
        == "source of revenue"
    )


def test_a_question_ending_in_a_preposition_is_answered_by_what_follows_it_in_the_sentence() -> None:
    assert (
        short(
            "Who did the Varn guilds strike against?",
            "The Varn guilds, under Osric Tolt, went on a long strike against the Harbour Board in 1907.",
        )
        == "Harbour Board"
    )


def test_a_one_word_name_with_an_inner_capital_opening_the_lead_answers_a_subject_question() -> None:
    assert (
        short(
            "Which Varn monk became a trusted adviser of the Tolt Council?",
            "Chu'Lan advised the Tolt Council for a decade and became a friend of the Varn Elders.",
        )
        == "Chu'Lan"
    )


def test_a_which_question_about_a_kind_of_person_expects_a_person() -> None:
    assert classify_question("Which Tolt harbour pilot first charted the reef?").answer_type == "thing"
    assert classify_question("Which Norwegian sculptor cast the Varn birds?").answer_type == "person"
    assert classify_question("Simon & Simon starred which television and movie actor?").answer_type == "person"
    assert classify_question("What actresses were cast in the Varn revival?").answer_type == "person"  # -es plural
    sources = [
        page(
            1,
            "Varn birds",
            "The Varn birds were cast in bronze for the harbour in 1961, and the casting took the Varn foundry "
            "nearly a year. Mara Quill cast the Varn birds after winning a competition held by the town.",
        )
    ]
    selection = select_answer("Which Norwegian sculptor cast the Varn birds?", sources)
    assert selection.answered and selection.span == "Mara Quill"  # given as the short answer when the gate passes


def test_a_century_or_a_decade_answers_a_when_question() -> None:
    sources = [
        page(
            1,
            "Varn bridge",
            "The Varn bridge was built by the river guild of Tolt, and it was later widened for carts. "
            "The guild built the Varn bridge during the 14th century, after the old ford flooded.",
        )
    ]
    selection = select_answer("In which century did the guild build the Varn bridge?", sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("The guild built the Varn bridge during the 14th century")
    assert selection.short_answer == "14th century"


def test_a_naming_question_s_short_answer_is_what_follows_named_or_called() -> None:
    sources = [
        page(
            1,
            "Tolt ferries",
            'Exactly 12 months later, on 3 May 1950, the harbour board put a new ferry under the name "Varn Star".',
        )
    ]
    selection = select_answer("What did the harbour board name the new ferry on 3 May 1950?", sources)
    assert selection.answered and selection.span == "Varn Star"


def test_the_day_of_a_date_is_no_count() -> None:
    sources = [
        page(
            1,
            "Tolt Ferry Company",
            "The Tolt Ferry Company (founded 2 May 1936) is a harbour firm of Tolt. "
            "Boats of the firm have carried more than 40 million passengers across the bay.",
        )
    ]
    selection = select_answer("The Tolt Ferry Company has carried more than how many passengers?", sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("Boats of the firm have carried")
    assert selection.short_answer == "40 million"


def test_a_sentence_about_this_notion_is_judged_with_the_sentence_that_states_it() -> None:
    sources = [
        page(
            1,
            "River towns",
            "Some surveys of river towns have found evidence confirming the Varn hypothesis, which states that "
            "towns grow fastest beside bridges. "
            "Historian Thomas Lorne challenges this notion, claiming that roads mattered more than bridges.",
        )
    ]
    selection = select_answer("Who challenges the Varn hypothesis?", sources)
    assert selection.answered
    assert selection.sentences[0].statement.startswith("Historian Thomas Lorne challenges this notion")
    assert "Thomas Lorne" in (selection.span or "")


def test_a_pronoun_lead_that_names_the_asked_value_itself_stays_first() -> None:
    sources = [
        page(
            1,
            "Tolt movement",
            "The Tolt movement differed from other farming movements in its coastal base. "
            "Their ideology was also described as being influenced by the writings of Thomas Lorne.",
        )
    ]
    selection = select_answer("Who influenced the Tolt movement's ideology?", sources)
    assert selection.sentences[0].statement.startswith("Their ideology was also described")
    assert selection.short_answer == "Thomas Lorne"


def test_short_answer_is_the_instance_named_after_such_as() -> None:
    sources = [
        page(
            1,
            "Trout",
            "Some river diseases such as whirling fever strike trout preferentially, and their onset often "
            "coincides with the spring floods.",
        )
    ]
    assert select_answer("What is a river disease that strikes trout preferentially?", sources).span == (
        "whirling fever"
    )


def test_a_howto_answer_quotes_no_sentence_of_an_unrelated_page_that_only_shares_a_word() -> None:
    # "as long as" on a page about filtering shares "long" with the question and nothing else: after the
    # lead, a sentence of another page than the leading API's must clear the body's relevance floor
    fillers = [
        page(
            3 + i,
            f"garden.Bed{i} — A raised bed number {i}.",
            f"garden.Bed{i}(size)\n\nThe raised bed {i} holds soil and seeds. Water it every morning in summer.",
        )
        for i in range(6)
    ]
    sources = [
        page(
            1,
            "stopwatch.Lap — Record how long a block of code runs.",
            "stopwatch.Lap(label=None)\n\nA lap records the seconds a block of code runs. Call stop() to end the lap.",
        ),
        page(
            2,
            "rivers.keepwhile — Keep entries while a test holds.",
            "rivers.keepwhile(test, items)\n\nEntries are kept as long as the test holds true for each entry.",
        ),
        *fillers,
    ]
    selection = select_answer("How do I find out how long a block of code runs?", sources)
    assert selection.answered and selection.sentences[0].statement == "stopwatch.Lap(label=None)"
    assert all(c.n == 1 for c in selection.sentences)


def test_a_module_pages_summary_line_is_a_call_signature_that_may_lead_a_howto_answer() -> None:
    # pydoc's module summaries list functions as "name(args) -- what it does": such a line is the function's
    # signature, named with its module in the short answer
    sources = [
        page(
            1,
            "netkit.web — Fetch web pages over HTTP.",
            "netkit.web — Fetch web pages over HTTP.\n\n"
            "The simplest way to send an HTTP request is the fetch function.\n\n"
            "fetch(url, timeout=None) -- Send an HTTP request for the url and return the response body.",
        ),
        page(
            2,
            "webserve.RequestHandler.list_files — Helper to list a folder.",
            "webserve.RequestHandler.list_files(self, path)\n\nThe folder listing is sent back with its headers.",
        ),
    ]
    selection = select_answer("How do I send an HTTP request?", sources)
    assert selection.answered and selection.sentences[0].statement == "fetch(url, timeout=None)"
    assert selection.short_answer == "netkit.web.fetch(...)"


def test_a_kind_of_question_asks_about_the_noun_after_of() -> None:
    # "What type of tidal mill ...?": the mill is what the span ranker looks for beside the answer
    assert classify_question("What type of tidal mill did the Varn monks build?").head_noun == "mill"
