"""Issue 45 item 7 and the small one, on SQLite: a NUL in a run or checkpoint id is refused at the boundary
with 422 as on Postgres (tests/postgres/test_api_on_postgres.py), an unknown id is a 404; and the routes
docs/langgraph.md lists as not served (updating state by hand, thread prune) answer 404, not 405."""

from __future__ import annotations

from .conftest import LiveApi


async def test_nul_in_an_id_is_a_422_and_an_unknown_id_a_404(api: LiveApi) -> None:
    tid = (await api.client.post("/threads", json={})).json()["thread_id"]
    assert (await api.client.get(f"/threads/{tid}/state/ab%00c")).status_code == 422
    nul = {"checkpoint": {"checkpoint_id": "ab\u0000c"}}
    assert (await api.client.post(f"/threads/{tid}/state/checkpoint", json=nul)).status_code == 422
    assert (await api.client.get(f"/threads/{tid}/runs/ab%00c")).status_code == 422
    assert (await api.client.get(f"/threads/{tid}/runs/abc")).status_code == 404


async def test_routes_not_served_answer_404(api: LiveApi) -> None:
    tid = (await api.client.post("/threads", json={})).json()["thread_id"]
    edit = await api.client.post(f"/threads/{tid}/state", json={"values": {"query": "x"}})
    assert edit.status_code == 404, edit.text
    prune = await api.client.post("/threads/prune", json={"thread_ids": [tid]})
    assert prune.status_code == 404, prune.text
    assert (await api.client.get(f"/threads/{tid}")).status_code == 200  # nothing was pruned
