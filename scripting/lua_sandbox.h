// LuaSandbox: one Lua 5.4 state for untrusted policy scripts, with a memory cap, an instruction
// budget, a wall-clock deadline, cancellation and an allow-listed standard library. Every error
// comes back as an absl::Status carrying the Lua traceback; a bad script never takes the process
// down, and the sandbox stays usable (or cleanly destroyable) after any error.
//
//   SandboxLimits limits;
//   limits.memory_bytes = 16 << 20;
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<LuaSandbox> box, LuaSandbox::Create(limits));
//   BANYAN_RETURN_IF_ERROR(box->Run("policy.lua", script_text));
//   double value = 0;
//   BANYAN_RETURN_IF_ERROR(box->Protected("score", [&](lua_State* L) {
//     lua_getglobal(L, "score");
//     lua_pushinteger(L, 7);
//     lua_call(L, 1, 1);           // errors unwind to Protected and become a Status
//     value = lua_tonumber(L, -1);
//   }));
//
// What a script can reach (everything else is absent, not merely hidden: the state's global
// table IS the sandbox environment, so there is no outer _ENV to escape to):
//   base: assert error ipairs next pairs pcall xpcall select tonumber tostring type rawequal
//         rawget rawlen getmetatable _G _VERSION, and checked versions of
//         setmetatable (refuses metatables with __gc or __close: Lua may run those with hooks
//         disabled), xpcall (the script's handler is skipped once the call is failing),
//         rawset (refuses the sandbox's read-only tables), load (text chunks only, mode "t",
//         string sources only), print (into a bounded log, see TakeLog), collectgarbage
//         ("count", "collect", "step" only). No dofile, loadfile, require, warn.
//   string: everything except dump, pack, packsize, unpack; rep is size-checked; find, match,
//         gmatch, gsub are cost-checked (below). The string metatable is protected
//         (getmetatable("") returns "protected"; its __index table is unreachable).
//   table (sort and concat end with a deadline check), math (seeded from limits.random_seed),
//   utf8, coroutine (create and wrap install the budget hook on the new thread),
//   os.clock and os.time() only. No io, os.*, debug, package.
// Library tables are read-only proxies: assignment, rawset, setmetatable on them all fail.
//
// Budgets. Per call (Run or Protected): `instructions_per_call` VM instructions, counted by a
// count hook every `hook_interval` instructions on every thread, and `time_per_call` of wall
// time, checked in the same hook and after every long-running C library call; time spent in host
// callbacks (see ExcludeFromDeadline) is not charged. Per sandbox: `instructions_total` over all
// calls, and the memory cap, which covers everything the state allocates. Once a budget is
// exceeded the failure is sticky for the rest of the call: the hook fires on every instruction
// and re-raises, so a script's own pcall/xpcall/coroutine.resume cannot swallow it.
//
// Catastrophic patterns. A count hook never fires inside one long C call, so a single
// string.find(string.rep("a", 1e5), ".-.-.-.-.-.-.-b") cannot be interrupted once started. We
// prevent it instead: before find/match/gmatch/gsub run, PatternCostBound (lua_pattern_cost.h)
// computes an upper bound on the matcher's work from the pattern's structure and the subject's
// character runs; if it exceeds `pattern_steps` the call is refused (kDeadlineExceeded) without
// running. Ordinary patterns on text are far below the bound; after each call that does run, the
// deadline is checked again, so a loop of expensive-but-allowed calls is still stopped.
//
// Long C calls. Besides the pattern functions, every library C function runs in time linear in
// its inputs and output, which the memory cap bounds (a table.sort of the largest table that fits
// in 32 MiB takes well under a second); sort, concat, rep, collectgarbage and the pattern
// functions check the deadline when they return. The deadline may therefore be overshot by one
// such call, never more.
//
// Memory. Live data above cap - cap/8 found at a hook tick (after a full collection) fails with
// the script's traceback. A single allocation that would pass the hard cap is refused at once;
// Lua then collects, retries once and raises "not enough memory", a memory error that Lua never
// passes to a message handler: that status names the refused request instead of a traceback.
//
// Error codes (the message starts with the `what` label, ends with the Lua traceback):
//   memory cap                     -> kResourceExhausted (also string.rep over the cap)
//   instruction budget, deadline, refused pattern -> kDeadlineExceeded
//   Cancel() / limits.cancel_flag  -> kCancelled
//   syntax error, binary chunk     -> kInvalidArgument
//   runtime error raised by the script (error(), bad arithmetic, calling nil, a blocked
//   function) -> kInvalidArgument: the script, an input, is at fault, the host is fine.
//   a host callback's failure      -> that callback's own code (see Abort)
//   an error inside the error handler, or a C++ exception escaping a callback -> kInternal
//
// Thread-safety: not thread-safe; one thread at a time may call a sandbox. Cancel() and the
// external cancel flag may be used from any thread at any time.
#ifndef BANYAN_SCRIPTING_LUA_SANDBOX_H_
#define BANYAN_SCRIPTING_LUA_SANDBOX_H_

#include <lua.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace banyan::scripting {

struct SandboxLimits {
  // Hard cap on all bytes the state allocates. Live data above (cap - cap/8) seen at a hook tick
  // after a full collection also fails: the last eighth is headroom for error handling.
  size_t memory_bytes = 32u << 20;
  int64_t instructions_per_call = 50'000'000;
  int64_t instructions_total = 0;  // over the sandbox's life; 0 = unlimited
  absl::Duration time_per_call = absl::Seconds(1);
  int hook_interval = 1000;  // instructions between budget checks; REQUIRES: >= 1
  // Largest worst-case matcher work (lua_pattern_cost.h steps) one pattern call may need;
  // about 0.1-0.3 s of matching on a current x86 core.
  double pattern_steps = 2e7;
  size_t max_log_bytes = 64u << 10;  // print() output kept; the rest is dropped
  uint64_t random_seed = 0;          // math.randomseed at creation (deterministic scripts)
  // Optional external cancellation, read with acquire loads in the hook. Borrowed: must outlive
  // the sandbox. The sandbox's own Cancel() works with or without it.
  const std::atomic<bool>* cancel_flag = nullptr;
};

class LuaSandbox {
 public:
  // Creates a sandboxed state. Errors: kInvalidArgument for bad limits, kResourceExhausted when
  // the libraries do not fit in `limits.memory_bytes`.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LuaSandbox>> Create(
      const SandboxLimits& limits);

  LuaSandbox(const LuaSandbox&) = delete;
  LuaSandbox& operator=(const LuaSandbox&) = delete;
  ~LuaSandbox();  // closes the state; no script code runs (there are no finalizers)

  // Compiles `code` as a text chunk named `chunk_name` and runs its top level, within one call's
  // budget. Globals it defines persist in the sandbox. Errors: see the table above.
  [[nodiscard]] absl::Status Run(std::string_view chunk_name, std::string_view code);

  // Runs `body` as one budgeted call in protected mode on the main thread: `body` may use any Lua
  // API, including lua_call into script functions; any Lua error inside it unwinds (C++
  // destructors run: Lua is compiled as C++) and becomes the returned Status, labelled `what`.
  // The stack is restored to its height at entry. Errors: see the table above, plus
  // kFailedPrecondition when called re-entrantly (from inside a callback of a running call).
  [[nodiscard]] absl::Status Protected(std::string_view what,
                                       absl::FunctionRef<void(lua_State*)> body);

  // Requests cancellation of the running call (from any thread); the script stops at its next
  // hook tick with kCancelled. Sticky: later calls fail with kCancelled until ResetCancel().
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  void ResetCancel() { cancelled_.store(false, std::memory_order_release); }

  // Bytes the state holds now / at most so far; exact (every realloc counted old size -> new
  // size), equal to Lua's own collectgarbage("count") * 1024.
  size_t memory_in_use() const { return in_use_; }
  size_t memory_peak() const { return peak_; }
  const SandboxLimits& limits() const { return limits_; }
  // VM instructions charged to the last call / to all calls (multiples of hook_interval).
  int64_t instructions_last_call() const { return call_instructions_; }
  int64_t instructions_total() const { return total_instructions_; }

  // Runs a full garbage collection (outside any call).
  [[nodiscard]] absl::Status CollectGarbage();

  // Returns and clears what print() wrote.
  std::string TakeLog();

  // The raw state, for pushing values inside Protected bodies. Owned by the sandbox.
  lua_State* state() const { return state_; }

  // --- For C functions the sandbox runs (the `banyan` API, the safe libraries) ---

  // The sandbox that owns `L` (any of its threads).
  static LuaSandbox* FromState(lua_State* L);
  // Raises an error that the script cannot catch: the running call will fail with `status`'s
  // code (the first such status wins). Never returns; written `return Abort(L, status);` in a
  // lua_CFunction, like luaL_error. REQUIRES: `status` is not OK; inside a running call.
  static int Abort(lua_State* L, const absl::Status& status);
  // Checks cancellation and the deadline now (a checkpoint after long C work); raises like Abort
  // when either has run out, returns otherwise.
  static void Checkpoint(lua_State* L);
  // Whether the table at `index` is one of the sandbox's read-only proxies (see PushReadOnly).
  static bool IsReadOnly(lua_State* L, int index);
  // Whether the running call has already failed (a budget or an Abort): no script code may run.
  bool failing() const { return !abort_.ok(); }
  // Appends print() output to the log, dropping what exceeds limits().max_log_bytes.
  void AppendLog(std::string_view text);
  // Adds `elapsed` to the running call's deadline (time spent in host callbacks).
  void ExcludeFromDeadline(std::chrono::steady_clock::duration elapsed) { deadline_ += elapsed; }
  // Pushes a read-only proxy of the table at `index`: reads see the table, writes (assignment,
  // rawset, setmetatable) raise, getmetatable returns "protected", pairs sees nothing.
  static void PushReadOnly(lua_State* L, int index);
  // Installs the budget hook on thread `L` (coroutine.create/wrap do this for new threads).
  static void InstallHook(lua_State* L);

 private:
  explicit LuaSandbox(const SandboxLimits& limits);

  static void* Allocate(void* ud, void* ptr, size_t old_size, size_t new_size);
  static void Hook(lua_State* L, lua_Debug* ar);
  static int MessageHandler(lua_State* L);
  static int Trampoline(lua_State* L);

  absl::Status CallProtected(std::string_view what, absl::FunctionRef<void(lua_State*)> body,
                             bool check_cancel);

  // The first budget failure of this call (sticky), or OK.
  void SetAbort(absl::Status status);
  // Evaluates cancellation, budgets, deadline and memory; sets abort_ on failure.
  void CheckBudgets(lua_State* L, bool in_hook);
  bool IsCancelled() const;
  absl::Status StatusFromLua(std::string_view what, int lua_status);

  SandboxLimits limits_;
  lua_State* state_ = nullptr;
  std::atomic<bool> cancelled_{false};

  // Memory accounting (single-threaded: the allocator runs on the calling thread).
  size_t in_use_ = 0;
  size_t peak_ = 0;
  size_t soft_limit_ = 0;        // memory_bytes - memory_bytes / 8
  size_t refused_request_ = 0;   // size of the last refused allocation in this call
  bool in_error_handling_ = false;  // lets the handler use the headroom

  // Per-call state.
  bool in_call_ = false;
  int64_t call_instructions_ = 0;
  int64_t total_instructions_ = 0;
  std::chrono::steady_clock::time_point deadline_{};
  absl::Status abort_;

  std::string log_;
};

}  // namespace banyan::scripting

#endif  // BANYAN_SCRIPTING_LUA_SANDBOX_H_
