#pragma once
#define SANDBOX_MCP_VERSION "0.1.0"
