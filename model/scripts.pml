/*
  The record of one idempotency key and its nine scripts (lua/*.lua), each one atomic step.

  Included by record.pml (the checked system: workers, an operator and the environment) and by the replay
  harness of model/src/replay.ts (the same steps on a given sequence, compared with model/src/record-model.ts,
  which the model-based tests hold the real Lua and the memory store to). Each inline follows its script
  branch by branch; the comments name the script.

  What the model keeps of a record (lua/claim.lua lists the real fields): s state, t fencing token, a attempt,
  live (the lease expiry e is after the server clock), the flags v reserved, l lapsed, d dead-lettered,
  b abandoned, r result (0 none, else the id of the handler's result), x the error, p the fingerprint.
  Times are not kept: the lease is live or lapsed, and the environment lapses it. Tokens are the server
  clock in microseconds (clk), which moves on by at least one between two claims that issue a token.

  Hooks: the including file defines ON_ISSUE, ON_LANDED, ON_COMPLETED, ON_RELEASED, ON_FAILED, ON_STARTED,
  ON_EXHAUSTED, ON_STALE, ON_ADMIN_RELEASED and ON_LOST (ghost bookkeeping and property checks; empty in
  the replay harness).
*/

/* States (s), and the replies' first elements; FAILED is both. The numbers are the trace's (model/src/trace.ts). */
#define NONE 0
#define IN_PROGRESS 1
#define COMPLETED 2
#define RELEASED 3
#define FAILED 4
#define ACQUIRED 5
#define ACQUIRED_STALE 6
#define DUPLICATE 7
#define CONFLICT 8
#define PAYLOAD_MISMATCH 9
#define OK 10
#define LEASE_LOST 11
#define NOT_FOUND 12
#define NOT_RELEASABLE 13
#define TOKEN_CHANGED 14
#define DELETED 15
#define LEASE_HELD 16
#define OTHER_STATE 17

/* The error a FAILED record holds (x). */
#define X_NONE 0
#define X_HANDLER 1             /* fail.lua: the holder's error */
#define X_EXHAUSTED 2           /* claim.lua: 'ATTEMPTS_EXHAUSTED: a of max attempts used' */
#define X_EXHAUSTED_LAPSED 3    /* ... ', the last one lost its lease' */
#define X_EXHAUSTED_ABANDONED 4 /* ... ', the last one recorded no outcome (...)' */

/* States an operator's purge may delete (admin-purge.lua ARGV[1]), as bits; 0 = any. */
#define PURGE_P 1
#define PURGE_C 2
#define PURGE_R 4
#define PURGE_F 8
#define STATE_BIT(s) (s == IN_PROGRESS -> PURGE_P : (s == COMPLETED -> PURGE_C : (s == RELEASED -> PURGE_R : PURGE_F)))

typedef Record {
  byte s;   /* NONE: there is no record */
  byte t;
  byte a;
  bool live;
  bool v;
  bool l;
  bool d;
  bool b;
  byte r;
  byte x;
  byte p;
}

/*
  A script's reply: kind is its first element; t a token (the claim's, or the record's current one), a an
  attempt, val the rest (started 0/1, a DUPLICATE's result, a FAILED reply's error, start's attempt,
  mark-dead-lettered's first), flag a FAILED reply's deadLettered, s a state (LEASE_LOST, PAYLOAD_MISMATCH,
  the admin replies).
*/
typedef Reply {
  byte kind;
  byte t;
  byte a;
  byte val;
  bool flag;
  byte s;
}

Record rec;
Reply rep;
byte clk = 0;

/* Scratch of one step (not part of the state: every step sets them before it reads them). */
hidden byte cOutcome;
hidden byte cRanBefore;
hidden byte cAbandoned;
hidden byte cTok;
hidden byte cAttempt;
hidden byte fenceOk;

/*
  The guards the properties rest on (record.pml says which property rests on which). With MUTANTS
  defined, the global mutant names one to remove, for the mutation tests: the mutated model must then
  produce a counterexample. Without it (the replay harness) every guard holds.
*/
#define DROP_LIVE_LEASE_CONFLICT 1
#define DROP_CLOCK_IN_TOKEN 2
#define KEEP_TOKEN_ON_TAKEOVER 3
#define DROP_WRITE_FENCE 4
#define DROP_COMPLETE_FENCE 5
#define DROP_NEVER_STARTED_GIVE_BACK 6
#define DROP_DUPLICATE 7
#define DROP_RESERVED_IN_RAN_BEFORE 8
#define RUN_ON_SHORT_LEASE 9
#ifdef MUTANTS
#define MUTATED(m) (mutant == m)
#else
#define MUTATED(m) false
#endif
#define LEASE_IS_HELD (rec.live && !MUTATED(DROP_LIVE_LEASE_CONFLICT))
#define CLOCK_TOKEN (rec.t + 1 > clk -> rec.t + 1 : clk)
#define NEXT_TOKEN (MUTATED(DROP_CLOCK_IN_TOKEN) -> rec.t + 1 : \
  ((MUTATED(KEEP_TOKEN_ON_TAKEOVER) && rec.s == IN_PROGRESS) -> rec.t : CLOCK_TOKEN))
#define WRITE_FENCE(tok) (rec.t == tok || MUTATED(DROP_WRITE_FENCE))
#define COMPLETE_FENCE(tok) (rec.t == tok || MUTATED(DROP_COMPLETE_FENCE))
#define GIVES_ATTEMPT_BACK(neverStarted) (neverStarted && !rec.v && rec.a > 0 && !MUTATED(DROP_NEVER_STARTED_GIVE_BACK))
#define IS_COMPLETED (rec.s == COMPLETED && !MUTATED(DROP_DUPLICATE))
#define HANDLER_RAN (rec.s == IN_PROGRESS && (!rec.v || MUTATED(DROP_RESERVED_IN_RAN_BEFORE)))

inline setReply(k, tk, at, vl, fl, st) {
  rep.kind = k;
  rep.t = tk;
  rep.a = at;
  rep.val = vl;
  rep.flag = fl;
  rep.s = st
}

/* The record is gone (DEL, expiry, eviction, a restart without persistence, an operator's purge). */
inline loseRecord() {
  rec.s = NONE;
  rec.t = 0;
  rec.a = 0;
  rec.live = false;
  rec.v = false;
  rec.l = false;
  rec.d = false;
  rec.b = false;
  rec.r = 0;
  rec.x = X_NONE;
  rec.p = 0;
  ON_LOST()
}

/* claim.lua: fp 0 for none, maxAtt 0 for unlimited, reserve 1 for a reservation. */
inline claim(fp, maxAtt, reserve) {
  if
  :: rec.s != NONE && fp != 0 && rec.p != 0 && rec.p != fp ->
    setReply(PAYLOAD_MISMATCH, rec.t, rec.a, 0, false, rec.s)
  :: else ->
    if
    :: IS_COMPLETED -> setReply(DUPLICATE, rec.t, rec.a, rec.r, false, NONE)
    :: else ->
      if
      :: rec.s == FAILED -> setReply(FAILED, rec.t, rec.a, rec.x, rec.d, NONE)
      :: else ->
        cOutcome = ACQUIRED;
        cRanBefore = HANDLER_RAN;
        cAbandoned = rec.b;
        if
        :: cAbandoned -> cOutcome = ACQUIRED_STALE
        :: else -> skip
        fi;
        if
        :: rec.s == IN_PROGRESS && LEASE_IS_HELD -> setReply(CONFLICT, rec.t, rec.a, 0, false, NONE)
        :: else ->
          if
          :: rec.s == IN_PROGRESS && cRanBefore -> cOutcome = ACQUIRED_STALE
          :: else -> skip
          fi;
          if
          :: rec.s != NONE && maxAtt > 0 && rec.a >= maxAtt ->
            /* The claim that would start attempt maxAtt + 1 turns the record FAILED. */
            if
            :: cRanBefore -> rec.x = X_EXHAUSTED_LAPSED; rec.l = true
            :: !cRanBefore && cAbandoned -> rec.x = X_EXHAUSTED_ABANDONED
            :: else -> rec.x = X_EXHAUSTED
            fi;
            ON_EXHAUSTED(maxAtt);
            rec.s = FAILED;
            rec.live = false;
            rec.v = false;
            setReply(FAILED, rec.t, rec.a, rec.x, false, NONE)
          :: else ->
            if
            :: cOutcome == ACQUIRED_STALE -> ON_STALE()
            :: else -> skip
            fi;
            /* The new token: max(token + 1, the server clock), the clock having moved on. */
            clk++;
            cTok = NEXT_TOKEN;
            cAttempt = rec.a + 1;
            ON_ISSUE(cTok, reserve);
            if
            :: reserve ->
              rec.v = true;
              if
              :: cRanBefore && !cAbandoned -> rec.b = true
              :: else -> skip
              fi
            :: else ->
              rec.a = rec.a + 1;
              rec.v = false;
              rec.b = false
            fi;
            if
            :: fp != 0 && rec.p == 0 -> rec.p = fp
            :: else -> skip
            fi;
            rec.s = IN_PROGRESS;
            rec.t = cTok;
            rec.live = true;
            setReply(cOutcome, cTok, cAttempt, (reserve -> 0 : 1), false, NONE)
          fi
        fi
      fi
    fi
  fi
}

/* includes/fence.lua: the record carries tok and is IN_PROGRESS (okP), FAILED (okF) or FAILED lapsed (okLapsed). */
inline fence(tokenMatches, okP, okF, okLapsed) {
  fenceOk = (rec.s != NONE && tokenMatches
    && ((rec.s == IN_PROGRESS && okP) || (rec.s == FAILED && (okF || (okLapsed && rec.l)))));
  if
  :: !fenceOk -> setReply(LEASE_LOST, rec.t, 0, 0, false, rec.s)
  :: else -> skip
  fi
}

/* complete.lua: result 0 for none. */
inline complete(tok, result) {
  fence(COMPLETE_FENCE(tok), true, false, true);
  if
  :: fenceOk ->
    ON_LANDED(tok);
    ON_COMPLETED(tok);
    rec.s = COMPLETED;
    rec.live = false;
    rec.x = X_NONE;
    rec.d = false;
    rec.l = false;
    rec.v = false;
    rec.b = false;
    rec.r = result;
    setReply(OK, 0, 0, 0, false, NONE)
  :: else -> skip
  fi
}

/* release.lua (through includes/end-claim.lua). */
inline release(tok, abandoned, neverStarted) {
  fence(WRITE_FENCE(tok), true, false, false);
  if
  :: fenceOk ->
    ON_LANDED(tok);
    ON_RELEASED(tok, abandoned, neverStarted);
    if
    :: GIVES_ATTEMPT_BACK(neverStarted) -> rec.a = rec.a - 1
    :: else -> skip
    fi;
    if
    :: abandoned -> rec.b = true
    :: else -> skip
    fi;
    rec.s = RELEASED;
    rec.live = false;
    rec.v = false;
    setReply(OK, 0, 0, 0, false, NONE)
  :: else -> skip
  fi
}

/* fail.lua (through includes/end-claim.lua); why is a ghost: the holder's reason (record.pml). */
inline fail(tok, abandoned, why) {
  fence(WRITE_FENCE(tok), true, false, false);
  if
  :: fenceOk ->
    ON_LANDED(tok);
    ON_FAILED(tok, abandoned, why);
    rec.x = X_HANDLER;
    if
    :: abandoned -> rec.b = true
    :: else -> skip
    fi;
    rec.s = FAILED;
    rec.live = false;
    rec.v = false;
    setReply(OK, 0, 0, 0, false, NONE)
  :: else -> skip
  fi
}

/* extend.lua (through includes/lease.lua). */
inline extend(tok) {
  fence(WRITE_FENCE(tok), true, false, false);
  if
  :: fenceOk ->
    ON_LANDED(tok);
    rec.live = true;
    setReply(OK, 0, 0, 0, false, NONE)
  :: else -> skip
  fi
}

/* start.lua (through includes/lease.lua): a reservation's attempt counts now; b is cleared. */
inline start(tok) {
  fence(WRITE_FENCE(tok), true, false, false);
  if
  :: fenceOk ->
    ON_LANDED(tok);
    ON_STARTED(tok);
    if
    :: rec.v -> rec.a = rec.a + 1
    :: else -> skip
    fi;
    rec.v = false;
    rec.b = false;
    rec.live = true;
    setReply(OK, 0, rec.a, 0, false, NONE)
  :: else -> skip
  fi
}

/* mark-dead-lettered.lua: val is first (1 when this call set the mark). */
inline markDeadLettered(tok) {
  fence(WRITE_FENCE(tok), false, true, false);
  if
  :: fenceOk ->
    ON_LANDED(tok);
    setReply(OK, 0, 0, (rec.d -> 0 : 1), false, NONE);
    rec.d = true
  :: else -> skip
  fi
}

/* admin-release.lua: expTok 0 for any, expState NONE for any. */
inline adminRelease(expTok, expState) {
  if
  :: rec.s == NONE -> setReply(NOT_FOUND, 0, 0, 0, false, NONE)
  :: else ->
    if
    :: (expTok > 0 && rec.t != expTok) || (expState != NONE && rec.s != expState) ->
      setReply(TOKEN_CHANGED, rec.t, 0, 0, false, rec.s)
    :: else ->
      if
      :: rec.s != IN_PROGRESS && rec.s != FAILED -> setReply(NOT_RELEASABLE, rec.t, 0, 0, false, rec.s)
      :: else ->
        setReply(OK, rec.t, 0, 0, false, rec.s);
        if
        :: (rec.s == IN_PROGRESS && !rec.v) || (rec.s == FAILED && (rec.l || rec.b)) -> rec.b = true
        :: else -> skip
        fi;
        rec.s = RELEASED;
        rec.a = 0;
        rec.live = false;
        rec.x = X_NONE;
        rec.v = false;
        rec.l = false;
        rec.d = false;
        ON_ADMIN_RELEASED()
      fi
    fi
  fi
}

/* admin-purge.lua: states is a set of PURGE_* bits, 0 for any. */
inline adminPurge(states) {
  if
  :: rec.s == NONE -> setReply(NOT_FOUND, 0, 0, 0, false, NONE)
  :: else ->
    if
    :: states != 0 && (states & STATE_BIT(rec.s)) == 0 -> setReply(OTHER_STATE, 0, 0, 0, false, rec.s)
    :: else ->
      if
      :: rec.s == IN_PROGRESS && rec.live -> setReply(LEASE_HELD, rec.t, 0, 0, false, NONE)
      :: else ->
        setReply(DELETED, 0, 0, 0, false, rec.s);
        loseRecord()
      fi
    fi
  fi
}
