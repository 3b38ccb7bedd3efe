#include "scripting/lua_sandbox.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scripting/lua_safe_libs.h"

namespace banyan::scripting {
namespace {

// Extra bytes above the cap that error handling (the message and its traceback) may use once a
// call is failing; a failing script gets at most a hook tick of instructions to use it.
constexpr size_t kErrorReserve = 64u << 10;
// Longest Lua error message (with traceback) copied into a Status.
constexpr size_t kMaxMessageBytes = 8u << 10;
// Longest error object text the message handler keeps before adding the traceback.
constexpr size_t kMaxErrorText = 4u << 10;

// Registry key (by address) of the weak-keyed set of read-only proxies.
const char kReadOnlySetKey = 'r';

int ReadOnlyNewIndex(lua_State* L) {
  return luaL_error(L, "attempt to modify a read-only table");
}

std::string Truncated(std::string_view text, size_t limit) {
  if (text.size() <= limit) return std::string(text);
  return absl::StrCat(absl::string_view(text.data(), limit), "...(truncated)");
}

}  // namespace

LuaSandbox::LuaSandbox(const SandboxLimits& limits)
    : limits_(limits), soft_limit_(limits.memory_bytes - limits.memory_bytes / 8) {}

absl::StatusOr<std::unique_ptr<LuaSandbox>> LuaSandbox::Create(const SandboxLimits& limits) {
  if (limits.memory_bytes < (64u << 10)) {
    return absl::InvalidArgumentError("LuaSandbox: memory_bytes must be at least 64 KiB");
  }
  if (limits.instructions_per_call <= 0 || limits.instructions_total < 0 ||
      limits.hook_interval < 1 || limits.time_per_call <= absl::ZeroDuration() ||
      !(limits.pattern_steps > 0)) {
    return absl::InvalidArgumentError(
        "LuaSandbox: instructions_per_call, hook_interval, time_per_call and pattern_steps must "
        "be positive, instructions_total non-negative");
  }
  std::unique_ptr<LuaSandbox> box(new LuaSandbox(limits));
  box->state_ = lua_newstate(&LuaSandbox::Allocate, box.get());
  if (box->state_ == nullptr) {
    return absl::ResourceExhaustedError("LuaSandbox: the Lua state does not fit in memory_bytes");
  }
  absl::Status setup = box->CallProtected(
      "sandbox setup",
      [&](lua_State* L) {
        lua_newtable(L);  // the read-only set, weak keys
        lua_newtable(L);
        lua_pushliteral(L, "k");
        lua_setfield(L, -2, "__mode");
        lua_setmetatable(L, -2);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &kReadOnlySetKey);
        OpenSafeLibraries(L, limits);
      },
      /*check_cancel=*/false);
  if (!setup.ok()) return setup;
  return box;
}

LuaSandbox::~LuaSandbox() {
  if (state_ == nullptr) return;
  // Nothing scripted can run at close (no finalizers, no pending to-be-closed variables outside
  // a call); should anything try, it fails at once.
  in_call_ = true;
  abort_ = absl::CancelledError("sandbox closing");
  lua_sethook(state_, &LuaSandbox::Hook, LUA_MASKCOUNT, 1);
  lua_close(state_);
}

LuaSandbox* LuaSandbox::FromState(lua_State* L) {
  void* ud = nullptr;
  lua_getallocf(L, &ud);
  return static_cast<LuaSandbox*>(ud);
}

void* LuaSandbox::Allocate(void* ud, void* ptr, size_t old_size, size_t new_size) {
  auto* box = static_cast<LuaSandbox*>(ud);
  // With ptr == NULL, old_size encodes the object type, not a size.
  const size_t old = ptr == nullptr ? 0 : old_size;
  if (new_size == 0) {
    std::free(ptr);
    box->in_use_ -= old;
    return nullptr;
  }
  if (new_size > old) {
    const size_t growth = new_size - old;
    const bool failing = !box->abort_.ok() || box->in_error_handling_;
    const size_t limit = box->limits_.memory_bytes + (failing ? kErrorReserve : 0);
    if (growth > limit || box->in_use_ > limit - growth) {
      box->refused_request_ = new_size;
      return nullptr;  // Lua collects and retries once, then raises "not enough memory"
    }
  }
  void* block = std::realloc(ptr, new_size);
  if (block == nullptr) {
    if (new_size <= old) {  // a failed shrink: the old block is still valid and big enough
      box->in_use_ -= old - new_size;
      return ptr;
    }
    box->refused_request_ = new_size;
    return nullptr;
  }
  box->in_use_ = box->in_use_ - old + new_size;
  box->peak_ = std::max(box->peak_, box->in_use_);
  return block;
}

bool LuaSandbox::IsCancelled() const {
  return cancelled_.load(std::memory_order_acquire) ||
         (limits_.cancel_flag != nullptr && limits_.cancel_flag->load(std::memory_order_acquire));
}

void LuaSandbox::SetAbort(absl::Status status) {
  if (abort_.ok()) abort_ = std::move(status);
}

void LuaSandbox::CheckBudgets(lua_State* L, bool in_hook) {
  if (!abort_.ok()) return;
  if (IsCancelled()) {
    SetAbort(absl::CancelledError("script cancelled"));
  } else if (call_instructions_ > limits_.instructions_per_call) {
    SetAbort(absl::DeadlineExceededError(absl::StrCat(
        "instruction budget of ", limits_.instructions_per_call, " per call exceeded")));
  } else if (limits_.instructions_total > 0 &&
             total_instructions_ + call_instructions_ > limits_.instructions_total) {
    SetAbort(absl::DeadlineExceededError(absl::StrCat(
        "instruction budget of ", limits_.instructions_total, " for the sandbox exceeded")));
  } else if (std::chrono::steady_clock::now() > deadline_) {
    SetAbort(absl::DeadlineExceededError(absl::StrCat(
        "wall-clock deadline of ", absl::FormatDuration(limits_.time_per_call),
        " per call exceeded")));
  } else if (in_hook && in_use_ > soft_limit_) {
    lua_gc(L, LUA_GCCOLLECT);  // only live data counts against the cap
    if (in_use_ > soft_limit_) {
      SetAbort(absl::ResourceExhaustedError(absl::StrCat(
          "memory cap exceeded: ", in_use_, " bytes live after a full collection, limit ",
          soft_limit_, " (cap ", limits_.memory_bytes, " less error headroom)")));
    }
  }
}

void LuaSandbox::Hook(lua_State* L, lua_Debug* /*ar*/) {
  LuaSandbox* box = FromState(L);
  if (!box->in_call_) return;
  box->call_instructions_ += lua_gethookcount(L);
  box->CheckBudgets(L, /*in_hook=*/true);
  if (!box->abort_.ok()) {
    // Sticky: from now on this thread re-raises at every instruction, so a script's pcall,
    // xpcall or coroutine.resume cannot swallow the failure.
    lua_sethook(L, &LuaSandbox::Hook, LUA_MASKCOUNT, 1);
    const std::string message(box->abort_.message());
    luaL_error(L, "%s", message.c_str());
    return;
  }
  if (lua_gethookcount(L) != box->limits_.hook_interval) InstallHook(L);
}

void LuaSandbox::InstallHook(lua_State* L) {
  lua_sethook(L, &LuaSandbox::Hook, LUA_MASKCOUNT, FromState(L)->limits_.hook_interval);
}

int LuaSandbox::Abort(lua_State* L, const absl::Status& status) {
  LuaSandbox* box = FromState(L);
  box->SetAbort(status);
  lua_sethook(L, &LuaSandbox::Hook, LUA_MASKCOUNT, 1);
  const std::string message(box->abort_.message());
  return luaL_error(L, "%s", message.c_str());
}

void LuaSandbox::Checkpoint(lua_State* L) {
  LuaSandbox* box = FromState(L);
  box->CheckBudgets(L, /*in_hook=*/false);
  if (!box->abort_.ok()) Abort(L, box->abort_);
}

bool LuaSandbox::IsReadOnly(lua_State* L, int index) {
  if (lua_type(L, index) != LUA_TTABLE) return false;
  index = lua_absindex(L, index);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kReadOnlySetKey);
  lua_pushvalue(L, index);
  const bool read_only = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 2);
  return read_only;
}

void LuaSandbox::PushReadOnly(lua_State* L, int index) {
  index = lua_absindex(L, index);
  luaL_checkstack(L, 4, "read-only proxy");
  lua_createtable(L, 0, 0);  // the proxy
  lua_createtable(L, 0, 3);  // its metatable
  lua_pushvalue(L, index);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, &ReadOnlyNewIndex);
  lua_setfield(L, -2, "__newindex");
  lua_pushliteral(L, "protected");
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kReadOnlySetKey);
  lua_pushvalue(L, -2);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void LuaSandbox::AppendLog(std::string_view text) {
  if (log_.size() >= limits_.max_log_bytes) return;
  log_.append(text.substr(0, limits_.max_log_bytes - log_.size()));
}

std::string LuaSandbox::TakeLog() { return std::exchange(log_, std::string()); }

int LuaSandbox::MessageHandler(lua_State* L) {
  LuaSandbox* box = FromState(L);
  box->in_error_handling_ = true;  // the traceback may use the error reserve
  const int type = lua_type(L, 1);
  if (type != LUA_TSTRING && type != LUA_TNUMBER) {
    // A table (or other) error object: use its __tostring when that works, in protected mode so
    // a failing or looping __tostring cannot turn into an error inside the handler.
    bool described = false;
    if (box->abort_.ok() && luaL_getmetafield(L, 1, "__tostring") != LUA_TNIL) {
      lua_pushvalue(L, 1);
      described = lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING;
      if (described) lua_replace(L, 1);
    }
    if (!described) {
      lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
      lua_replace(L, 1);
    }
  }
  size_t length = 0;
  const char* text = lua_tolstring(L, 1, &length);
  if (length > kMaxErrorText) {
    lua_pushlstring(L, text, kMaxErrorText);
    lua_pushliteral(L, "...(truncated)");
    lua_concat(L, 2);
    lua_replace(L, 1);
    text = lua_tostring(L, 1);
  }
  luaL_traceback(L, L, text, 1);
  return 1;
}

int LuaSandbox::Trampoline(lua_State* L) {
  auto* body = static_cast<absl::FunctionRef<void(lua_State*)>*>(lua_touserdata(L, 1));
  lua_settop(L, 0);
  try {
    (*body)(L);
  } catch (const std::exception& e) {  // a host exception; Lua's own errors are not std::
    return Abort(L, absl::InternalError(absl::StrCat("C++ exception: ", e.what())));
  }
  return 0;
}

absl::Status LuaSandbox::Protected(std::string_view what,
                                   absl::FunctionRef<void(lua_State*)> body) {
  return CallProtected(what, body, /*check_cancel=*/true);
}

absl::Status LuaSandbox::CallProtected(std::string_view what,
                                       absl::FunctionRef<void(lua_State*)> body,
                                       bool check_cancel) {
  if (in_call_) {
    return absl::FailedPreconditionError(
        absl::StrCat(std::string(what), ": the sandbox is already running a call"));
  }
  if (check_cancel && IsCancelled()) {
    return absl::CancelledError(absl::StrCat(std::string(what), ": sandbox is cancelled"));
  }
  if (limits_.instructions_total > 0 && total_instructions_ >= limits_.instructions_total) {
    return absl::DeadlineExceededError(absl::StrCat(
        std::string(what), ": instruction budget of ", limits_.instructions_total,
        " for the sandbox is spent"));
  }
  lua_State* L = state_;
  const int top = lua_gettop(L);
  if (!lua_checkstack(L, 3)) {
    return absl::ResourceExhaustedError(absl::StrCat(std::string(what), ": Lua stack is full"));
  }
  in_call_ = true;
  call_instructions_ = 0;
  abort_ = absl::OkStatus();
  refused_request_ = 0;
  in_error_handling_ = false;
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  absl::ToChronoNanoseconds(limits_.time_per_call));
  InstallHook(L);
  lua_pushcfunction(L, &LuaSandbox::MessageHandler);
  lua_pushcfunction(L, &LuaSandbox::Trampoline);
  lua_pushlightuserdata(L, &body);
  const int lua_status = lua_pcall(L, 1, 0, top + 1);
  absl::Status result = absl::OkStatus();
  if (lua_status != LUA_OK || !abort_.ok()) result = StatusFromLua(what, lua_status);
  lua_settop(L, top);
  total_instructions_ += call_instructions_;
  if (result.code() == absl::StatusCode::kResourceExhausted) {
    lua_gc(L, LUA_GCCOLLECT);  // give back what the failed call left as garbage
  }
  abort_ = absl::OkStatus();
  in_error_handling_ = false;
  in_call_ = false;
  return result;
}

absl::Status LuaSandbox::StatusFromLua(std::string_view what, int lua_status) {
  std::string lua_message;
  if (lua_status != LUA_OK && lua_type(state_, -1) == LUA_TSTRING) {
    size_t length = 0;
    const char* text = lua_tolstring(state_, -1, &length);
    lua_message = Truncated(std::string_view(text, length), kMaxMessageBytes);
  }
  absl::StatusCode code;
  std::string head;
  if (!abort_.ok()) {
    code = abort_.code();
    head = std::string(abort_.message());
  } else {
    switch (lua_status) {
      case LUA_ERRMEM:
        code = absl::StatusCode::kResourceExhausted;
        head = absl::StrCat("memory cap of ", limits_.memory_bytes, " bytes: a request for ",
                            refused_request_, " bytes was refused with ", in_use_,
                            " bytes in use");
        break;
      case LUA_ERRRUN:
      case LUA_ERRSYNTAX:
        code = absl::StatusCode::kInvalidArgument;
        break;
      case LUA_ERRERR:
        code = refused_request_ > 0 ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
        head = "error while handling an error";
        break;
      default:
        code = absl::StatusCode::kInternal;
        head = absl::StrCat("unexpected Lua status ", lua_status);
    }
  }
  std::string message = absl::StrCat(std::string(what), ": ");
  if (!head.empty() && lua_message.find(head) == std::string::npos) {
    absl::StrAppend(&message, head, lua_message.empty() ? "" : "\n");
  }
  absl::StrAppend(&message, lua_message);
  return absl::Status(code, message);
}

absl::Status LuaSandbox::Run(std::string_view chunk_name, std::string_view code) {
  const std::string name = absl::StrCat("=", std::string(chunk_name));
  return Protected(chunk_name, [&](lua_State* L) {
    const int status = luaL_loadbufferx(L, code.data(), code.size(), name.c_str(), "t");
    if (status != LUA_OK) {
      const std::string error = lua_tostring(L, -1) != nullptr ? lua_tostring(L, -1) : "";
      Abort(L, status == LUA_ERRMEM ? absl::ResourceExhaustedError(error)
                                    : absl::InvalidArgumentError(error));
    }
    lua_call(L, 0, 0);
  });
}

absl::Status LuaSandbox::CollectGarbage() {
  if (in_call_) {
    return absl::FailedPreconditionError("CollectGarbage: the sandbox is running a call");
  }
  lua_gc(state_, LUA_GCCOLLECT);
  return absl::OkStatus();
}

}  // namespace banyan::scripting
