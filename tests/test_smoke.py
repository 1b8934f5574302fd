import pytest

pytestmark = pytest.mark.anyio


async def test_task_roundtrip(serve_inprocess):
    async with serve_inprocess() as (wire, _):
        created = (await wire.call_tool("slow_job", {"seconds": 0.5})).result
        print(created)
        assert created["resultType"] == "task"
        got = (await wire.get(created["taskId"])).result
        print(got)
