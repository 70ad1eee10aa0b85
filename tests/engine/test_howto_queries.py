"""How-to questions searched as their action paired with each thing it acts on (invented questions)."""

from __future__ import annotations

from research_tool.engines.text.howto_queries import action_pairs, actions, is_howto
from research_tool.engines.text.planning import plan_queries
from research_tool.models.domain import DOMAINS


def test_only_how_to_questions_are_paired() -> None:
    assert is_howto("How do I bake bread?") and is_howto("how to bake bread")
    assert not is_howto("How many loaves did the bakery sell?")
    assert action_pairs("Who baked the bread in the harbour town?") == []
    assert actions("When did the bakery open?") == []


def test_the_action_is_paired_with_each_run_of_words_it_acts_on() -> None:
    assert action_pairs("How do I bake bread in an oven with steam?") == ["bake bread", "bake oven", "bake steam"]


def test_the_parts_of_a_question_take_turns() -> None:
    pairs = action_pairs("How do I slice a loaf against the grain and wrap slices?")
    assert pairs == ["slice loaf", "wrap slices", "slice grain"]
    assert actions("How do I slice a loaf against the grain and wrap slices?") == ["slice", "wrap"]


def test_a_generic_opening_verb_leaves_the_first_words_as_the_topic() -> None:
    # "get" names no action of its own: the first run of words is what the question is about
    assert action_pairs("How do I get the crust colour with a glaze?") == ["crust colour glaze"]
    assert actions("How do I get the crust colour with a glaze?") == []


def test_the_language_and_filler_nouns_pair_with_nothing() -> None:
    assert action_pairs("How do I knead dough in a Python program?") == ["knead dough"]


def test_a_how_to_plan_searches_the_pairs_right_after_the_whole_question() -> None:
    queries = [q.query for q in plan_queries("How do I bake bread in an oven with steam?", DOMAINS["general"], 3)]
    assert queries == ["bake bread oven steam", "bake bread", "bake oven"]
