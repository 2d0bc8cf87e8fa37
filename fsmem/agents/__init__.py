"""The faces for agents: tool schemas and their dispatcher, the JSON-RPC decoder, MCP over stdio, Claude's memory tool."""
