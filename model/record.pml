/*
  The record of one idempotency key, its scripts (scripts.pml, one atomic step each) and everyone who
  runs them, checked by spin over every interleaving for small bounds (model/README.md says which bounds
  were explored, how many states, and how to run it).

  Actors:
  - NW workers running the runner's protocol (runner/idempotency.ts): claim (counted) or reserve (a batch);
    on CONFLICT wait and claim again, WAITS times; ACQUIRED: an extension first when the local lease may
    be short, or at once while it is live; a reservation's start; the handler, heartbeating; then complete,
    release or fail (retried once when unanswered), or a claim given back unrun (release, neverStarted);
    a FAILED reply is marked dead-lettered. Each worker takes DELIVERIES deliveries of the one message.
  - an operator: admin-release (with the token and state it inspected, or any) and admin-purge.
  - the environment: the server clock passes the lease; a worker's own count of its lease ends earlier;
    the record is lost (DEL, expiry, a restart without persistence), LOSSES times; a worker crashes at any
    step, CRASHES times; a reply is lost after its command was applied, or the caller gives up before it
    was (it is then applied late, after later steps of its caller, or never), FAULTS times.

  The server lease and the worker's own: the runner counts a lease from when it sent the claim or the
  extension that granted it, so its own lease never ends after the server's. When the server clock passes
  the lease, the holder's own count has ended too.

  Properties (docs/design.md, "Guarantees", in its words where it has them), as assertions:
  P1 At most one worker whose writes can land at a time: no two workers hold a claim that the fence of
     complete would accept.
  P2 At most one handler runs per key at a time, within its lease: a second claim while the lease is live
     answers CONFLICT. (Within one life of the record and until an operator releases it: a lost record
     forgets its lease, and an operator's release ends it, while the old handler may still run; its
     writes are refused, P1 and P3.)
  P3 A stalled worker cannot overwrite a newer one: every write that lands carries the newest token
     issued for the key.
  P4 Tokens strictly increase for a key, also across the loss of its record.
  P5 A COMPLETED record's result comes from a handler that ran, under the claim whose token the record
     carries.
  P6 A key turns FAILED only after maxAttempts handlers started (or may have: a counted claim or a start
     the store applied, not given back unrun) or after a non-retryable failure, never from claims that
     never ran.
  P7 A completed key never runs again while the record lives (and no operator released it): no handler
     starts on it.
  P8 Every ACQUIRED_STALE follows a handler that may have run: an earlier claim of this record whose
     handler may have started recorded no outcome (complete, fail, or a release that did not abandon it).

  Each property rests on a guard; removing it (a -D flag of scripts.pml or below) gives a counterexample
  (model/test/model-check.test.ts): P1 KEEP_TOKEN_ON_TAKEOVER, P2 DROP_LIVE_LEASE_CONFLICT,
  P3 DROP_WRITE_FENCE, P4 DROP_CLOCK_IN_TOKEN, P5 DROP_COMPLETE_FENCE, P6 DROP_NEVER_STARTED_GIVE_BACK,
  P7 DROP_DUPLICATE, P8 DROP_RESERVED_IN_RAN_BEFORE; and the runner's own guard, RUN_ON_SHORT_LEASE (the
  handler starts without the extension when its own lease has ended), breaks P2 and P7.
*/

/*
  The bounds, read from the environment when pan starts (init, below), so that one compiled verifier
  checks every configuration and every mutation (model/src/spin.ts): MODEL_WORKERS (at most NW),
  MODEL_DELIVERIES, MODEL_WAITS, MODEL_MAX_ATTEMPTS, MODEL_LOSSES, MODEL_CRASHES, MODEL_FAULTS,
  MODEL_ADMIN_RELEASES, MODEL_PURGES; MODEL_MUTANT (a guard to remove, scripts.pml) and MODEL_ONLY (the
  one property to check, 0 for all).
*/
#define NW 3
byte workers;
byte deliveries;
byte waitsAllowed;
byte maxAttempts;
byte lossesAllowed;
byte crashesAllowed;
byte faultsAllowed;
byte adminReleasesAllowed;
byte purgesAllowed;
byte mutant;
byte only;

c_decl {
  static unsigned char modelBound(const char *name, unsigned char otherwise) {
    const char *value = getenv(name);
    return value != NULL && *value != '\0' ? (unsigned char) atoi(value) : otherwise;
  }
}

#define MUTANTS
/*
  Tokens are kept canonical (canon() below): after every step the tokens still referred to are renumbered
  1, 2, ... in their order, and the ghosts of the others are folded into counts. Comparisons between
  tokens (equal, greater) are all the scripts and the properties make, so nothing they see changes, and
  histories that differ only in how many tokens were issued before are one state.
*/
#define MAXTOK (2 * NW + 4)
#define MAXATT maxAttempts

/*
  Ghosts, per token. A life of the record ends when it is lost; an epoch also when an operator releases
  it. inLife, inEpoch: issued in the current one; mayRun: its handler may have run (the store was told it
  starts: a counted claim, or a start, and it was not given back unrun); ran: a worker started its
  handler; recorded: it recorded an outcome (complete, fail, or a release that did not abandon it).
  Of the tokens nobody refers to any more (no worker, no command in flight, not the record): in this epoch,
  how many may have run (up to MAXATT), and in this life, whether one may have run and recorded nothing.
*/
bit inLife[MAXTOK + 1];
bit inEpoch[MAXTOK + 1];
bit mayRun[MAXTOK + 1];
bit ran[MAXTOK + 1];
bit recorded[MAXTOK + 1];
byte lastIssued = 0;
byte forgottenMayRun = 0;
bool forgottenUnrecorded = false;
bool completedInEpoch = false;

/* The properties, by number: a failed assertion prints the one it checks. */
#define P1 1
#define P2 2
#define P3 3
#define P4 4
#define P5 5
#define P6 6
#define P7 7
#define P8 8
hidden byte gi;
hidden byte gj;
hidden byte gn;

#define CHECKED(prop) (only == 0 || only == prop)

#define ASSERT(prop, cond) \
  if \
  :: CHECKED(prop) && !(cond) -> printf("@violated %d\n", prop); assert(cond) \
  :: else -> skip \
  fi

/* Handlers that may have run in this epoch (P6). */
inline countMayRun() {
  gn = forgottenMayRun;
  gi = 1;
  do
  :: gi <= lastIssued -> if :: mayRun[gi] && inEpoch[gi] -> gn++ :: else -> skip fi; gi++
  :: else -> break
  od
}

#define ON_ISSUE(tok, reserve) \
  ASSERT(P4, tok > lastIssued); \
  lastIssued = tok; \
  inLife[tok] = 1; \
  inEpoch[tok] = 1; \
  mayRun[tok] = !reserve; \
  ran[tok] = 0; \
  recorded[tok] = 0

#define ON_LANDED(tok) ASSERT(P3, tok == lastIssued)

#define ON_COMPLETED(tok) \
  ASSERT(P5, ran[tok]); \
  recorded[tok] = 1; \
  completedInEpoch = true

#define ON_RELEASED(tok, abandoned, neverStarted) \
  if \
  :: neverStarted -> mayRun[tok] = 0 \
  :: else -> skip \
  fi; \
  if \
  :: !abandoned -> recorded[tok] = 1 \
  :: else -> skip \
  fi

/* why: WHY_NON_RETRYABLE, or WHY_LAST_ATTEMPT (the holder's attempt was maxAttempts). */
#define WHY_NON_RETRYABLE 1
#define WHY_LAST_ATTEMPT 2
#define ON_FAILED(tok, abandoned, why) \
  countMayRun(); \
  ASSERT(P6, why == WHY_NON_RETRYABLE || gn >= MAXATT); \
  if \
  :: !abandoned -> recorded[tok] = 1 \
  :: else -> skip \
  fi

#define ON_STARTED(tok) mayRun[tok] = 1

#define ON_EXHAUSTED(maxAtt) \
  countMayRun(); \
  ASSERT(P6, gn >= maxAtt)

/* P8: before the new token is issued, an earlier claim of this life may have run and recorded nothing. */
#define ON_STALE() \
  gn = forgottenUnrecorded; \
  gi = 1; \
  do \
  :: gi <= lastIssued -> \
    if :: inLife[gi] && mayRun[gi] && !recorded[gi] -> gn++ :: else -> skip fi; \
    gi++ \
  :: else -> break \
  od; \
  ASSERT(P8, gn > 0)

#define ON_ADMIN_RELEASED() \
  gi = 1; \
  do \
  :: gi <= MAXTOK -> inEpoch[gi] = 0; gi++ \
  :: else -> break \
  od; \
  forgottenMayRun = 0

#define ON_LOST() \
  gi = 1; \
  do \
  :: gi <= MAXTOK -> inLife[gi] = 0; inEpoch[gi] = 0; mayRun[gi] = 0; recorded[gi] = 0; gi++ \
  :: else -> break \
  od; \
  forgottenMayRun = 0; \
  forgottenUnrecorded = false; \
  completedInEpoch = false

#include "scripts.pml"

/* Worker phases. */
#define IDLE 0
#define CLAIMING 1
#define HOLDING 2     /* an acquired claim whose handler has not started */
#define RUNNING 3     /* its handler runs */
#define WRITING 4     /* its handler ended; wop[w] says which write */
#define DEAD_LETTERING 5
#define RETRYING 6    /* its write went unanswered: one more try */

/* Commands (a worker's, or one applied late). */
#define OP_CLAIM 1
#define OP_RESERVE 2
#define OP_START 3
#define OP_EXTEND 4
#define OP_COMPLETE 5       /* arg: 1 with a result (the handler's result names its token), 0 none */
#define OP_RELEASE 6        /* arg: ARG_ABANDONED | ARG_NEVER_STARTED */
#define OP_FAIL 7           /* arg: ARG_ABANDONED | why * 4 */
#define OP_MARK_DEAD 8
#define ARG_ABANDONED 1
#define ARG_NEVER_STARTED 2

byte phase[NW];
byte dels[NW];
byte waits[NW];
bool reserving[NW];
byte tok[NW];
bool last[NW];   /* its attempt is maxAttempts: a throw fails the record */
bool stale[NW];
bool reserved[NW];
bool ownLease[NW];
byte wop[NW];
byte warg[NW];
byte tries[NW];
/* A command whose caller gave up before it was applied (one per worker). */
byte lateOp[NW];
byte lateTok[NW];
byte lateArg[NW];
byte crashes = 0;
byte faults = 0;
byte losses = 0;
byte adminReleases = 0;
byte purges = 0;

hidden byte got;
hidden byte cResult;

inline apply(op, tk, arg) {
  d_step {
  if
  :: op == OP_CLAIM -> claim(1, MAXATT, 0)
  :: op == OP_RESERVE -> claim(1, MAXATT, 1)
  :: op == OP_START -> start(tk)
  :: op == OP_EXTEND -> extend(tk)
  :: op == OP_COMPLETE ->
    if
    :: arg != 0 -> cResult = tk
    :: else -> cResult = 0
    fi;
    complete(tk, cResult)
  :: op == OP_RELEASE -> release(tk, (arg & ARG_ABANDONED) != 0, (arg & ARG_NEVER_STARTED) != 0)
  :: op == OP_FAIL -> fail(tk, (arg & ARG_ABANDONED) != 0, arg / 4)
  :: op == OP_MARK_DEAD -> markDeadLettered(tk)
  fi
  }
}

/*
  The trace: one line per event, "@<event> <numbers>", which model/src/trace.ts turns into readable steps
  (pan -r prints them when it replays a counterexample).
*/
inline printReply() {
  printf("@reply %d %d %d %d %d %d\n", rep.kind, rep.t, rep.a, rep.val, rep.flag, rep.s);
  printf("@record %d %d %d %d %d %d %d %d %d %d\n", rec.s, rec.t, rec.a, rec.live, rec.v, rec.l, rec.d, rec.b, rec.r, rec.x)
}

/* The command a worker's step sends (set and read within the step). */
hidden byte cOp;
hidden byte cArg;

/*
  Worker w sends cOp (with its token and cArg): applied and answered (got), applied with its reply lost,
  or given up on before it was applied (then applied late, or never: the worker's environment steps).
  Either of the last two counts a fault.
*/
inline send(w) {
  printf("@send %d %d %d %d\n", w, cOp, tok[w], cArg);
  if
  :: faults < faultsAllowed && lateOp[w] == 0 ->
    faults++;
    lateOp[w] = cOp;
    lateTok[w] = tok[w];
    lateArg[w] = cArg;
    got = false;
    printf("@gaveup %d\n", w)
  :: true ->
    apply(cOp, tok[w], cArg);
    if
    :: got = true; printReply()
    :: faults < faultsAllowed -> faults++; got = false; printReply(); printf("@lost %d\n", w)
    fi
  fi
}

/* Old token -> its canonical number, 0 for a token nobody refers to (canon). */
hidden byte renumber[MAXTOK + 1];

#define REFER(t) renumber[t] = 1

/*
  Renumbers the tokens still referred to 1, 2, ... in order, and folds the ghosts of the others into
  forgottenMayRun and forgottenUnrecorded. Prints each renumbering ("~ old new") for the trace.
*/
inline canon() {
  gi = 0;
  do
  :: gi <= MAXTOK -> renumber[gi] = 0; gi++
  :: else -> break
  od;
  REFER(rec.t);
  REFER(rec.r);
  REFER(lastIssued);
  gi = 0;
  do
  :: gi < NW -> REFER(tok[gi]); REFER(lateTok[gi]); gi++
  :: else -> break
  od;
  gj = 0;
  gi = 1;
  do
  :: gi <= MAXTOK && renumber[gi] ->
    gj++;
    renumber[gi] = gj;
    if
    :: gj != gi ->
      printf("@renumber %d %d\n", gi, gj);
      inLife[gj] = inLife[gi];
      inEpoch[gj] = inEpoch[gi];
      mayRun[gj] = mayRun[gi];
      ran[gj] = ran[gi];
      recorded[gj] = recorded[gi]
    :: else -> skip
    fi;
    gi++
  :: gi <= MAXTOK && !renumber[gi] ->
    if
    :: inEpoch[gi] && mayRun[gi] && forgottenMayRun < MAXATT -> forgottenMayRun++
    :: else -> skip
    fi;
    if
    :: inLife[gi] && mayRun[gi] && !recorded[gi] -> forgottenUnrecorded = true
    :: else -> skip
    fi;
    gi++
  :: else -> break
  od;
  gi = gj + 1;
  do
  :: gi <= MAXTOK -> inLife[gi] = 0; inEpoch[gi] = 0; mayRun[gi] = 0; ran[gi] = 0; recorded[gi] = 0; gi++
  :: else -> break
  od;
  renumber[0] = 0;
  rec.t = renumber[rec.t];
  rec.r = renumber[rec.r];
  lastIssued = renumber[lastIssued];
  clk = lastIssued;
  gi = 0;
  do
  :: gi < NW -> tok[gi] = renumber[tok[gi]]; lateTok[gi] = renumber[lateTok[gi]]; gi++
  :: else -> break
  od
}

/* After every step: the invariants P1, P2 and P5, then the tokens made canonical. */
#define LANDABLE(w) \
  (phase[w] >= HOLDING && phase[w] <= WRITING && rec.s != NONE && rec.t == tok[w] \
   && (rec.s == IN_PROGRESS || (rec.s == FAILED && rec.l)))
#define RUNS_IN_LEASE(w) (phase[w] == RUNNING && ownLease[w] && inEpoch[tok[w]])

inline endStep() {
  gi = 0;
  do
  :: gi < NW ->
    gj = gi + 1;
    do
    :: gj < NW ->
      ASSERT(P1, !(LANDABLE(gi) && LANDABLE(gj)));
      ASSERT(P2, !(RUNS_IN_LEASE(gi) && RUNS_IN_LEASE(gj)));
      gj++
    :: else -> break
    od;
    gi++
  :: else -> break
  od;
  ASSERT(P5, rec.s != COMPLETED || rec.r == 0 || (rec.r == rec.t && ran[rec.r]));
  canon();
  skip
}

/* The delivery ends: the worker forgets its claim (states that differ only in what it forgot are one). */
inline toIdle(w) {
  phase[w] = IDLE;
  reserving[w] = false;
  waits[w] = 0;
  tok[w] = 0;
  last[w] = false;
  stale[w] = false;
  reserved[w] = false;
  ownLease[w] = false;
  wop[w] = 0;
  warg[w] = 0;
  tries[w] = 0
}

/* The handler of worker w's claim starts (P7). */
inline startHandler(w) {
  printf("@starts %d %d\n", w, tok[w]);
  ASSERT(P7, !(completedInEpoch && inEpoch[tok[w]]));
  ran[tok[w]] = 1;
  phase[w] = RUNNING
}

/* The runner's own guard: a counted claim's handler starts only while its own count of the lease runs. */
#define OWN_LEASE_LIVE(w) (ownLease[w] || mutant == RUN_ON_SHORT_LEASE)

proctype worker(byte w) {
end:
  do
  :: atomic {
      /* A counted claim whose lease is live by its own count: the handler starts without a store call. */
      phase[w] == HOLDING && !reserved[w] && OWN_LEASE_LIVE(w) -> d_step { startHandler(w); endStep() }
    }
  :: atomic {
      /* A step that calls the store: the command, sent, and what the worker does with the reply. */
      (phase[w] == IDLE && dels[w] < deliveries) || phase[w] != IDLE ->
      if
      /* A delivery of the message: claim it, counted or as a reservation (a batch consumer). */
      :: phase[w] == IDLE ->
        dels[w]++;
        waits[w] = waitsAllowed;
        if
        :: reserving[w] = false
        :: reserving[w] = true
        fi;
        phase[w] = CLAIMING;
        cOp = (reserving[w] -> OP_RESERVE : OP_CLAIM);
        cArg = 0
      /* Claims again during the conflict wait. */
      :: phase[w] == CLAIMING -> cOp = (reserving[w] -> OP_RESERVE : OP_CLAIM); cArg = 0
      /* A counted claim whose lease by its own count is short or over: one extension first. */
      :: phase[w] == HOLDING && !reserved[w] && !OWN_LEASE_LIVE(w) -> cOp = OP_EXTEND; cArg = 0
      :: phase[w] == HOLDING && reserved[w] -> cOp = OP_START; cArg = 0
      /* Given back unrun (a batch interrupted, a delivery that ended while it waited): one try. */
      :: phase[w] == HOLDING -> cOp = OP_RELEASE; cArg = (stale[w] -> ARG_ABANDONED : 0) | ARG_NEVER_STARTED
      /* The heartbeat. */
      :: phase[w] == RUNNING -> cOp = OP_EXTEND; cArg = 0
      /* The handler ends: returned (with or without a result), threw (retryable or not), timed out;
         its write follows at once. */
      :: phase[w] == RUNNING ->
        if
        :: cOp = OP_COMPLETE; cArg = 1; printf("@ends %d 1\n", w)
        :: cOp = OP_COMPLETE; cArg = 0; printf("@ends %d 2\n", w)
        :: !last[w] -> cOp = OP_RELEASE; cArg = 0; printf("@ends %d 3\n", w)
        :: !last[w] -> cOp = OP_RELEASE; cArg = ARG_ABANDONED; printf("@ends %d 4\n", w)
        :: last[w] -> cOp = OP_FAIL; cArg = WHY_LAST_ATTEMPT * 4; printf("@ends %d 3\n", w)
        :: last[w] -> cOp = OP_FAIL; cArg = WHY_LAST_ATTEMPT * 4 + ARG_ABANDONED; printf("@ends %d 4\n", w)
        :: cOp = OP_FAIL; cArg = WHY_NON_RETRYABLE * 4; printf("@ends %d 5\n", w)
        fi;
        wop[w] = cOp;
        warg[w] = cArg;
        phase[w] = WRITING
      /* The write once more, after an unanswered try (writeAttempts). */
      :: phase[w] == RETRYING -> cOp = wop[w]; cArg = warg[w]; phase[w] = WRITING
      :: phase[w] == DEAD_LETTERING -> cOp = OP_MARK_DEAD; cArg = 0
      fi;
      send(w);
      d_step {
      if
      :: phase[w] == CLAIMING ->
        if
        :: !got -> toIdle(w)
        :: got && (rep.kind == ACQUIRED || rep.kind == ACQUIRED_STALE) ->
          tok[w] = rep.t;
          last[w] = (rep.a >= MAXATT);
          stale[w] = (rep.kind == ACQUIRED_STALE);
          reserved[w] = (rep.val == 0);
          ownLease[w] = true;
          phase[w] = HOLDING;
          reserving[w] = false;
          waits[w] = 0
        :: got && rep.kind == CONFLICT && waits[w] > 0 -> waits[w]--
        :: got && rep.kind == CONFLICT && waits[w] == 0 -> toIdle(w)
        :: got && rep.kind == FAILED -> toIdle(w); tok[w] = rep.t; phase[w] = DEAD_LETTERING
        :: got && (rep.kind == DUPLICATE || rep.kind == PAYLOAD_MISMATCH) -> toIdle(w)
        fi
      :: phase[w] == HOLDING && cOp == OP_RELEASE -> toIdle(w)
      :: phase[w] == HOLDING && cOp != OP_RELEASE ->
        /* Refused or unanswered: nothing runs. */
        if
        :: got && rep.kind == OK ->
          if
          :: cOp == OP_START -> last[w] = (rep.a >= MAXATT)
          :: else -> skip
          fi;
          ownLease[w] = true;
          startHandler(w)
        :: else -> toIdle(w)
        fi
      :: phase[w] == RUNNING ->
        /* LEASE_LOST aborts the handler's signal; the handler may still go on. */
        if
        :: got && rep.kind == OK -> ownLease[w] = true
        :: got && rep.kind != OK -> ownLease[w] = false
        :: else -> skip
        fi
      :: phase[w] == WRITING ->
        /* Unanswered: tried once more, unless this was the retry. */
        if
        :: !got && tries[w] == 0 -> tries[w] = 1; phase[w] = RETRYING
        :: else -> toIdle(w)
        fi
      :: phase[w] == DEAD_LETTERING -> toIdle(w)
      fi;
      endStep()
      }
    }
  /* The environment's steps that concern this worker alone. */
  :: atomic {
      lateOp[w] != 0 ->
      if
      :: d_step {
          printf("@late %d %d %d %d\n", w, lateOp[w], lateTok[w], lateArg[w]);
          apply(lateOp[w], lateTok[w], lateArg[w]);
          printReply()
        }
      :: printf("@never %d %d %d %d\n", w, lateOp[w], lateTok[w], lateArg[w])
      fi;
      d_step {
        lateOp[w] = 0;
        lateTok[w] = 0;
        lateArg[w] = 0;
        endStep()
      }
    }
  :: d_step {
      phase[w] != IDLE && crashes < crashesAllowed ->
      crashes++;
      printf("@crash %d\n", w);
      toIdle(w);
      endStep()
    }
  od
}

active proctype environment() {
end:
  do
  :: d_step {
      rec.s == IN_PROGRESS && rec.live ->
      /* The server clock passes the lease: every own count of it has ended before. */
      rec.live = false;
      gj = 0;
      do
      :: gj < NW -> if :: tok[gj] == rec.t -> ownLease[gj] = false :: else -> skip fi; gj++
      :: else -> break
      od;
      printf("@lapse %d\n", rec.t);
      endStep()
    }
  :: d_step {
      losses < lossesAllowed && rec.s != NONE ->
      losses++;
      printf("@loss\n");
      loseRecord();
      endStep()
    }
  od
}

active proctype operator() {
end:
  do
  :: atomic {
      adminReleases < adminReleasesAllowed ->
      adminReleases++;
      if
      :: d_step { printf("@admin-release %d %d\n", rec.t, rec.s); adminRelease(rec.t, rec.s) }
      :: d_step { printf("@admin-release 0 0\n"); adminRelease(0, NONE) }
      fi;
      d_step { printReply(); endStep() }
    }
  :: atomic {
      purges < purgesAllowed ->
      purges++;
      if
      :: d_step { printf("@purge %d\n", PURGE_C | PURGE_F); adminPurge(PURGE_C | PURGE_F) }
      :: d_step { printf("@purge 0\n"); adminPurge(0) }
      fi;
      d_step { printReply(); endStep() }
    }
  od
}

init {
  c_code {
    now.workers = modelBound("MODEL_WORKERS", 3);
    now.deliveries = modelBound("MODEL_DELIVERIES", 1);
    now.waitsAllowed = modelBound("MODEL_WAITS", 1);
    now.maxAttempts = modelBound("MODEL_MAX_ATTEMPTS", 2);
    now.lossesAllowed = modelBound("MODEL_LOSSES", 0);
    now.crashesAllowed = modelBound("MODEL_CRASHES", 0);
    now.faultsAllowed = modelBound("MODEL_FAULTS", 1);
    now.adminReleasesAllowed = modelBound("MODEL_ADMIN_RELEASES", 0);
    now.purgesAllowed = modelBound("MODEL_PURGES", 0);
    now.mutant = modelBound("MODEL_MUTANT", 0);
    now.only = modelBound("MODEL_ONLY", 0);
    if (now.workers > NW) now.workers = NW;
  };
  atomic {
    byte i = 0;
    do
    :: i < workers -> run worker(i); i++
    :: else -> break
    od
  }
}
