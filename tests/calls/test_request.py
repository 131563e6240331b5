"""The request objects (osk/calls/request.py) name exactly the fields of the MCP tools that build
them, so a new argument is a field in each and nothing in between (server, Engine, write)."""

from __future__ import annotations

from dataclasses import fields

from osk.calls.request import NewNode, NodeEdit
from osk.surfaces.tool_models import CreateNodeArgs, UpdateNodeArgs


def test_create_node_takes_a_new_node_and_the_session_gives_its_scope():
    assert set(CreateNodeArgs.model_fields) == {f.name for f in fields(NewNode)} - {"scope"}


def test_update_node_takes_the_node_and_an_edit():
    assert set(UpdateNodeArgs.model_fields) == {f.name for f in fields(NodeEdit)} | {"node"}
