; The CPU command processor (tgfx/devices/native.py), an LLVM IR template: `native.runtime_ir` substitutes its
; placeholders (layouts, packet fields, this machine's spin hint and futex syscall) and compiles it once per process.
declare i32 @clock_gettime(i32, ptr)
declare i64 @syscall(i64, ...)
declare ptr @memmove(ptr, ptr, i64)
declare i32 @sched_getcpu()
$relax_decl

; CLOCK_MONOTONIC in ns: the clock of time.perf_counter_ns
define internal i64 @now() {
  %ts = alloca [2 x i64], align 8
  %r = call i32 @clock_gettime(i32 1, ptr %ts)
  %s = load i64, ptr %ts, align 8
  %nsp = getelementptr i64, ptr %ts, i64 1
  %ns = load i64, ptr %nsp, align 8
  %sns = mul i64 %s, 1000000000
  %t = add i64 %sns, %ns
  ret i64 %t
}

; the profile events' clock: the CPU's invariant time-stamp counter where it has one (two reads per EXEC or COPY:
; a third of clock_gettime's cost), which the host converts to CLOCK_MONOTONIC ns (`Runtime.stamps_to_ns`);
; CLOCK_MONOTONIC ns otherwise
define internal i64 @stamp() {
  $stamp_body
}

; a (stamp, ns, stamp) triple read back to back: the host's calibration of stamps against the clock
define void @tgfx_clock_pair(ptr %out) {
  %a = call i64 @stamp()
  %t = call i64 @now()
  %b = call i64 @stamp()
  store i64 %a, ptr %out, align 8
  %p1 = getelementptr i64, ptr %out, i64 1
  store i64 %t, ptr %p1, align 8
  %p2 = getelementptr i64, ptr %out, i64 2
  store i64 %b, ptr %p2, align 8
  ret void
}

define internal void @relax() {
  $relax_call
  ret void
}

define internal ptr @word(ptr %base, i64 %i) alwaysinline {
  %p = getelementptr i64, ptr %base, i64 %i
  ret ptr %p
}

define internal ptr @load_ptr(ptr %base, i64 %i) alwaysinline {
  %p = getelementptr i64, ptr %base, i64 %i
  %v = load atomic i64, ptr %p monotonic, align 8
  %q = inttoptr i64 %v to ptr
  ret ptr %q
}

; FUTEX_WAKE_PRIVATE: wake every sleeper on the word
define internal void @futex_wake(ptr %word) {
  %r = call i64 (i64, ...) @syscall(i64 $sys_futex, ptr %word, i64 129, i64 2147483647, ptr null, ptr null, i64 0)
  ret void
}

; FUTEX_WAIT_PRIVATE: sleep at most %ns while the low 32 bits of the word are those of %seen
define internal void @futex_wait(ptr %word, i64 %seen, i64 %ns) {
  %ts = alloca [2 x i64], align 8
  %s = udiv i64 %ns, 1000000000
  %n = urem i64 %ns, 1000000000
  store i64 %s, ptr %ts, align 8
  %np = getelementptr i64, ptr %ts, i64 1
  store i64 %n, ptr %np, align 8
  %lo = and i64 %seen, 4294967295
  %r = call i64 (i64, ...) @syscall(i64 $sys_futex, ptr %word, i64 128, i64 %lo, ptr %ts, ptr null, i64 0)
  ret void
}

define internal void @wake_sleepers(ptr %word) {
entry:
  %wp = getelementptr i64, ptr %word, i64 1
  %n = load atomic i32, ptr %wp seq_cst, align 4
  %any = icmp ne i32 %n, 0
  br i1 %any, label %wake, label %done
wake:
  call void @futex_wake(ptr %word)
  br label %done
done:
  ret void
}

; *word = value, then wake its sleepers
define void @tgfx_store_wake(ptr %word, i64 %value) {
  store atomic i64 %value, ptr %word seq_cst, align 8
  call void @wake_sleepers(ptr %word)
  ret void
}

; wake the word's sleepers unconditionally (they recheck their abort word)
define void @tgfx_wake(ptr %word) {
  call void @futex_wake(ptr %word)
  ret void
}

; compare-and-swap; returns the old value
define i64 @tgfx_cas(ptr %word, i64 %expected, i64 %new) {
  %r = cmpxchg ptr %word, i64 %expected, i64 %new seq_cst seq_cst
  %old = extractvalue { i64, i1 } %r, 0
  ret i64 %old
}

define internal i1 @aborted(ptr %abort) {
entry:
  %none = icmp eq ptr %abort, null
  br i1 %none, label %no, label %check
check:
  %v = load atomic i64, ptr %abort monotonic, align 8
  %set = icmp ne i64 %v, 0
  ret i1 %set
no:
  ret i1 false
}

; Wait until *word >= value (signed): poll for `spin_ns`, then sleep on the futex. Returns the value last seen,
; below `value` after `timeout` ns or once *abort (if not null) is nonzero. Polling only delays whoever it waits for
; when they share a core, so it stops when this thread runs on core *avoid (if not null), and sets *preempted (if
; not null) when the thread lost its core while polling (the cores are oversubscribed).
define internal i64 @wait_spin(ptr %word, i64 %value, i64 %timeout, i64 %spin_ns, ptr %abort, ptr %preempted,
                               ptr %avoid) {
entry:
  %v0 = load atomic i64, ptr %word acquire, align 8
  %ok0 = icmp sge i64 %v0, %value
  br i1 %ok0, label %done0, label %start
done0:
  ret i64 %v0
start:
  %t0 = call i64 @now()
  %deadline = add i64 %t0, %timeout
  %spin_end = add i64 %t0, %spin_ns
  br label %poll
poll:
  %t_prev = phi i64 [%t0, %start], [%t1, %polled]
  call void @relax()
  %v1 = load atomic i64, ptr %word acquire, align 8
  %ok1 = icmp sge i64 %v1, %value
  %ab1 = call i1 @aborted(ptr %abort)
  %stop1 = or i1 %ok1, %ab1
  br i1 %stop1, label %done1, label %clock
done1:
  ret i64 %v1
clock:
  %t1 = call i64 @now()
  %gap = sub i64 %t1, %t_prev
  %lost = icmp sgt i64 %gap, $preempt_gap
  br i1 %lost, label %note, label %shared
shared:
  %check = icmp ne ptr %avoid, null
  br i1 %check, label %check_cpu, label %polled
check_cpu:
  %cpu = call i32 @sched_getcpu()
  %cpu64 = sext i32 %cpu to i64
  %other = load atomic i64, ptr %avoid monotonic, align 8
  %same = icmp eq i64 %cpu64, %other
  br i1 %same, label %sleep_enter, label %polled
note:
  %has = icmp ne ptr %preempted, null
  br i1 %has, label %note_store, label %sleep_enter
note_store:
  store i64 1, ptr %preempted, align 8
  br label %sleep_enter
polled:
  %spinning = icmp slt i64 %t1, %spin_end
  br i1 %spinning, label %poll, label %sleep_enter
sleep_enter:
  %wp = getelementptr i64, ptr %word, i64 1
  %in = atomicrmw add ptr %wp, i32 1 seq_cst
  br label %sleep
sleep:
  %v2 = load atomic i64, ptr %word seq_cst, align 8
  %ok2 = icmp sge i64 %v2, %value
  %ab2 = call i1 @aborted(ptr %abort)
  %stop2 = or i1 %ok2, %ab2
  br i1 %stop2, label %leave, label %sleep_clock
sleep_clock:
  %t2 = call i64 @now()
  %rem = sub i64 %deadline, %t2
  %late = icmp sle i64 %rem, 0
  br i1 %late, label %leave, label %sleep_wait
sleep_wait:
  call void @futex_wait(ptr %word, i64 %v2, i64 %rem)
  br label %sleep
leave:
  %out = atomicrmw sub ptr %wp, i32 1 seq_cst
  %v3 = load atomic i64, ptr %word acquire, align 8
  ret i64 %v3
}

; the host's wait (and the processor's wait for its helpers): a fixed spin, not on core *avoid
define i64 @tgfx_wait_ge(ptr %word, i64 %value, i64 %timeout, i64 %spin_ns, ptr %abort, ptr %avoid) {
  %v = call i64 @wait_spin(ptr %word, i64 %value, i64 %timeout, i64 %spin_ns, ptr %abort, ptr null, ptr %avoid)
  ret i64 %v
}

; ring an engine's doorbell: note the host thread's core (the processor does not spin there), publish wptr
define void @tgfx_doorbell(ptr %ctl, i64 %wptr) {
  %cpu = call i32 @sched_getcpu()
  %cpu64 = sext i32 %cpu to i64
  %hp = getelementptr i64, ptr %ctl, i64 $w_host_cpu
  store atomic i64 %cpu64, ptr %hp monotonic, align 8
  %wp = getelementptr i64, ptr %ctl, i64 $w_wptr
  call void @tgfx_store_wake(ptr %wp, i64 %wptr)
  ret void
}

; a processor's or helper's wait, with the thread's adaptive spin budget (state: budget ns, waits left without
; spinning): a preempted spin drops the budget to 0 for the next $holdoff waits; after that it doubles back to max
define internal i64 @adaptive_wait(ptr %word, i64 %value, i64 %timeout, ptr %abort, ptr %state, i64 %max_spin,
                                   ptr %avoid) {
entry:
  %budget = load i64, ptr %state, align 8
  %hp = getelementptr i64, ptr %state, i64 1
  %holdoff = load i64, ptr %hp, align 8
  %flag = alloca i64, align 8
  store i64 0, ptr %flag, align 8
  %seen = call i64 @wait_spin(ptr %word, i64 %value, i64 %timeout, i64 %budget, ptr %abort, ptr %flag, ptr %avoid)
  %pre = load i64, ptr %flag, align 8
  %was = icmp ne i64 %pre, 0
  br i1 %was, label %back_off, label %calm
back_off:
  store i64 0, ptr %state, align 8
  store i64 $holdoff, ptr %hp, align 8
  ret i64 %seen
calm:
  %waiting = icmp sgt i64 %holdoff, 0
  br i1 %waiting, label %count_down, label %grow
count_down:
  %h1 = sub i64 %holdoff, 1
  store i64 %h1, ptr %hp, align 8
  ret i64 %seen
grow:
  %b2 = shl i64 %budget, 1
  %b3 = add i64 %b2, 1000
  %big = icmp sgt i64 %b3, %max_spin
  %b4 = select i1 %big, i64 %max_spin, i64 %b3
  store i64 %b4, ptr %state, align 8
  ret i64 %seen
}

; ---- faults

; whether fault `id` is unreported: its table record still holds its id
define internal i1 @live(ptr %g, i64 %id) {
entry:
  %none = icmp sle i64 %id, 0
  br i1 %none, label %no, label %check
check:
  %k = sub i64 %id, 1
  %slot = urem i64 %k, $fault_cap
  %off = mul i64 %slot, $fault_words
  %idx = add i64 %off, $g_fault_table
  %rec = call ptr @word(ptr %g, i64 %idx)
  %v = load atomic i64, ptr %rec acquire, align 8
  %is = icmp eq i64 %v, %id
  ret i1 %is
no:
  ret i1 false
}

; record a fault in the table; it becomes the poison of this submission unless an earlier fault is
define internal void @fault(ptr %ctl, i64 %kind, i64 %a, i64 %b, i64 %c, i64 %d) {
entry:
  %g = call ptr @load_ptr(ptr %ctl, i64 $w_global)
  %cnt = call ptr @word(ptr %g, i64 $g_faults)
  %old = atomicrmw add ptr %cnt, i64 1 seq_cst
  %id = add i64 %old, 1
  %slot = urem i64 %old, $fault_cap
  %off = mul i64 %slot, $fault_words
  %idx = add i64 %off, $g_fault_table
  %rec = call ptr @word(ptr %g, i64 %idx)
  %engp = call ptr @word(ptr %ctl, i64 $w_index)
  %eng = load i64, ptr %engp, align 8
  %r1 = getelementptr i64, ptr %rec, i64 1
  store atomic i64 %kind, ptr %r1 monotonic, align 8
  %r2 = getelementptr i64, ptr %rec, i64 2
  store atomic i64 %eng, ptr %r2 monotonic, align 8
  %r3 = getelementptr i64, ptr %rec, i64 3
  store atomic i64 %a, ptr %r3 monotonic, align 8
  %r4 = getelementptr i64, ptr %rec, i64 4
  store atomic i64 %b, ptr %r4 monotonic, align 8
  %r5 = getelementptr i64, ptr %rec, i64 5
  store atomic i64 %c, ptr %r5 monotonic, align 8
  %r6 = getelementptr i64, ptr %rec, i64 6
  store atomic i64 %d, ptr %r6 monotonic, align 8
  store atomic i64 %id, ptr %rec release, align 8
  %pp = call ptr @word(ptr %ctl, i64 $w_poison)
  %p = load i64, ptr %pp, align 8
  %clean = icmp eq i64 %p, 0
  br i1 %clean, label %poison, label %done
poison:
  store i64 %id, ptr %pp, align 8
  br label %done
done:
  ret void
}

; write a signal: attach this submission's unreported fault (unless the signal carries another), store, wake
define internal void @write_signal(ptr %ctl, ptr %sig, i64 %value) {
entry:
  %g = call ptr @load_ptr(ptr %ctl, i64 $w_global)
  %pp = call ptr @word(ptr %ctl, i64 $w_poison)
  %poison = load i64, ptr %pp, align 8
  %plive = call i1 @live(ptr %g, i64 %poison)
  br i1 %plive, label %check, label %store
check:
  %ep = getelementptr i64, ptr %sig, i64 $s_error
  %e = load atomic i64, ptr %ep monotonic, align 8
  %elive = call i1 @live(ptr %g, i64 %e)
  br i1 %elive, label %store, label %attach
attach:
  %atp = getelementptr i64, ptr %sig, i64 $s_error_at
  store atomic i64 %value, ptr %atp monotonic, align 8
  store atomic i64 %poison, ptr %ep release, align 8
  br label %store
store:
  %tlp = call ptr @load_ptr(ptr %ctl, i64 $w_timeline)
  %is_tl = icmp eq ptr %tlp, %sig
  br i1 %is_tl, label %end_submission, label %write
end_submission:
  store i64 0, ptr %pp, align 8
  br label %write
write:
  call void @tgfx_store_wake(ptr %sig, i64 %value)
  ret void
}

; ---- packets

; an EXEC or COPY starts: the waits of every engine see work running (only this engine's processor writes its
; progress words, so plain stores do)
define internal void @work_begins(ptr %ctl) {
  %bp = call ptr @word(ptr %ctl, i64 $w_busy)
  store atomic i64 1, ptr %bp monotonic, align 8
  ret void
}

; an EXEC or COPY ends: it retires, and its profile event (stamps t0, t1, and the ring position of the packet being
; run: which submission it belongs to) goes into the engine's ring
define internal void @record(ptr %ctl, i64 %id, i64 %size, i64 %t0, i64 %t1) {
  %dp = call ptr @word(ptr %ctl, i64 $w_retired)
  %d0 = load atomic i64, ptr %dp monotonic, align 8
  %d1 = add i64 %d0, 1
  store atomic i64 %d1, ptr %dp monotonic, align 8
  %bp = call ptr @word(ptr %ctl, i64 $w_busy)
  store atomic i64 0, ptr %bp release, align 8
  %ev = call ptr @load_ptr(ptr %ctl, i64 $w_events)
  %capp = call ptr @word(ptr %ctl, i64 $w_event_cap)
  %cap = load i64, ptr %capp, align 8
  %wp = call ptr @word(ptr %ctl, i64 $w_events_w)
  %k = load atomic i64, ptr %wp monotonic, align 8
  %slot = urem i64 %k, %cap
  %off = mul i64 %slot, $event_words
  %e0 = getelementptr i64, ptr %ev, i64 %off
  store atomic i64 %id, ptr %e0 monotonic, align 8
  %e1 = getelementptr i64, ptr %e0, i64 1
  store atomic i64 %size, ptr %e1 monotonic, align 8
  %e2 = getelementptr i64, ptr %e0, i64 2
  store atomic i64 %t0, ptr %e2 monotonic, align 8
  %e3 = getelementptr i64, ptr %e0, i64 3
  store atomic i64 %t1, ptr %e3 monotonic, align 8
  %rp = call ptr @word(ptr %ctl, i64 $w_rptr)
  %at = load atomic i64, ptr %rp monotonic, align 8
  %e4 = getelementptr i64, ptr %e0, i64 4
  store atomic i64 %at, ptr %e4 monotonic, align 8
  %k1 = add i64 %k, 1
  store atomic i64 %k1, ptr %wp release, align 8
  ret void
}

; claim core ids from the job's counter `np` and run them until all gs are taken (the processor and every helper
; that joins share this loop)
define internal void @run_claimed(ptr %np, i64 %gs, ptr %fn, ptr %bufs, ptr %vals) {
entry:
  br label %claim
claim:
  %core = atomicrmw add ptr %np, i64 1 monotonic
  %more = icmp slt i64 %core, %gs
  br i1 %more, label %run, label %done
run:
  call void %fn(ptr %bufs, ptr %vals, i64 %core)
  br label %claim
done:
  ret void
}

; a helper joins the job posted in `ctl` (if open, with core ids still to claim) and runs core ids until none are
; left; true if it joined. A job whose ids are all claimed is not joined again: a helper that kept re-joining one
; until its processor closed it never slept, and when it had preempted that processor on its core (a wake-up placed
; on the waker's core), the processor waited out the scheduler's time slice (a 20 us kernel took 2-4 ms)
define internal i1 @help(ptr %ctl) {
entry:
  %cp = call ptr @word(ptr %ctl, i64 $w_job_closed)
  %c0 = load atomic i64, ptr %cp seq_cst, align 8
  %open0 = icmp eq i64 %c0, 0
  br i1 %open0, label %claimable, label %skip
claimable:
  %np0 = call ptr @word(ptr %ctl, i64 $w_job_next)
  %n0 = load atomic i64, ptr %np0 monotonic, align 8
  %gsp0 = call ptr @word(ptr %ctl, i64 $w_job_gs)
  %gs0 = load atomic i64, ptr %gsp0 monotonic, align 8
  %left = icmp slt i64 %n0, %gs0
  br i1 %left, label %join, label %skip
skip:
  ret i1 false
join:
  %nj = call ptr @word(ptr %ctl, i64 $w_job_negjoined)
  %j = atomicrmw sub ptr %nj, i64 1 seq_cst
  %c1 = load atomic i64, ptr %cp seq_cst, align 8
  %open1 = icmp eq i64 %c1, 0
  br i1 %open1, label %work, label %leave
work:
  %jc = call ptr @word(ptr %ctl, i64 $w_job_joins)
  %jc0 = atomicrmw add ptr %jc, i64 1 monotonic
  %fn = call ptr @load_ptr(ptr %ctl, i64 $w_job_fn)
  %bufs = call ptr @load_ptr(ptr %ctl, i64 $w_job_bufs)
  %vals = call ptr @load_ptr(ptr %ctl, i64 $w_job_vals)
  %gsp = call ptr @word(ptr %ctl, i64 $w_job_gs)
  %gs = load atomic i64, ptr %gsp monotonic, align 8
  %np = call ptr @word(ptr %ctl, i64 $w_job_next)
  call void @run_claimed(ptr %np, i64 %gs, ptr %fn, ptr %bufs, ptr %vals)
  br label %leave
leave:
  %old = atomicrmw add ptr %nj, i64 1 seq_cst
  %last = icmp eq i64 %old, -1
  br i1 %last, label %wake, label %done
wake:
  call void @wake_sleepers(ptr %nj)
  br label %done
done:
  ret i1 %open1
}

; run core ids 0..gs-1 on this thread and any helpers that join
define internal void @parallel(ptr %ctl, ptr %fn, ptr %bufs, ptr %vals, i64 %gs) {
entry:
  %g = call ptr @load_ptr(ptr %ctl, i64 $w_global)
  %fnp = call ptr @word(ptr %ctl, i64 $w_job_fn)
  %fni = ptrtoint ptr %fn to i64
  store atomic i64 %fni, ptr %fnp monotonic, align 8
  %bp = call ptr @word(ptr %ctl, i64 $w_job_bufs)
  %bi = ptrtoint ptr %bufs to i64
  store atomic i64 %bi, ptr %bp monotonic, align 8
  %vp = call ptr @word(ptr %ctl, i64 $w_job_vals)
  %vi = ptrtoint ptr %vals to i64
  store atomic i64 %vi, ptr %vp monotonic, align 8
  %gsp = call ptr @word(ptr %ctl, i64 $w_job_gs)
  store atomic i64 %gs, ptr %gsp monotonic, align 8
  %np = call ptr @word(ptr %ctl, i64 $w_job_next)
  store atomic i64 0, ptr %np monotonic, align 8
  %cp = call ptr @word(ptr %ctl, i64 $w_job_closed)
  store atomic i64 0, ptr %cp seq_cst, align 8
  %ep = call ptr @word(ptr %g, i64 $g_epoch)
  %e = atomicrmw add ptr %ep, i64 1 seq_cst
  call void @wake_sleepers(ptr %ep)
  call void @run_claimed(ptr %np, i64 %gs, ptr %fn, ptr %bufs, ptr %vals)
  br label %close
close:
  store atomic i64 1, ptr %cp seq_cst, align 8
  %nj = call ptr @word(ptr %ctl, i64 $w_job_negjoined)
  br label %join
join:
  %left = call i64 @tgfx_wait_ge(ptr %nj, i64 0, i64 $forever, i64 $join_spin, ptr null, ptr null)
  %all = icmp sge i64 %left, 0
  br i1 %all, label %done, label %join
done:
  ret void
}

define internal void @run_exec(ptr %ctl, ptr %at, i64 %flags) {
entry:
  %pidp = getelementptr i64, ptr %at, i64 $exec_program_id
  %pid = load i64, ptr %pidp, align 8
  %fn = call ptr @load_ptr(ptr %at, i64 $exec_fn)
  %gsp = getelementptr i64, ptr %at, i64 $exec_global_size
  %gs = load i64, ptr %gsp, align 8
  %nbp = getelementptr i64, ptr %at, i64 $exec_nbufs
  %nbufs = load i64, ptr %nbp, align 8
  %bufs = getelementptr i64, ptr %at, i64 $exec_arrays
  %vals = getelementptr i64, ptr %bufs, i64 %nbufs
  call void @work_begins(ptr %ctl)
  %t0 = call i64 @stamp()
  %none = icmp slt i64 %gs, 1
  br i1 %none, label %done, label %kind
kind:
  %host = and i64 %flags, $exec_host_fn_bit
  %is_host = icmp ne i64 %host, 0
  br i1 %is_host, label %host_call, label %native
host_call:
  %hc = phi i64 [0, %kind], [%hc1, %host_next]
  %status = call i64 %fn(ptr %bufs, ptr %vals, i64 %hc)
  %failed = icmp ne i64 %status, 0
  br i1 %failed, label %host_fault, label %host_next
host_next:
  %hc1 = add i64 %hc, 1
  %host_more = icmp slt i64 %hc1, %gs
  br i1 %host_more, label %host_call, label %done
host_fault:
  call void @fault(ptr %ctl, i64 $f_host_exec, i64 %status, i64 %pid, i64 %hc, i64 0)
  br label %done
native:
  %single = icmp eq i64 %gs, 1
  br i1 %single, label %one, label %many
one:
  call void %fn(ptr %bufs, ptr %vals, i64 0)
  br label %done
many:
  call void @parallel(ptr %ctl, ptr %fn, ptr %bufs, ptr %vals, i64 %gs)
  br label %done
done:
  %t1 = call i64 @stamp()
  call void @record(ptr %ctl, i64 %pid, i64 %gs, i64 %t0, i64 %t1)
  ret void
}

define internal void @run_copy(ptr %ctl, ptr %at, i64 %flags) {
entry:
  %dst0 = call ptr @load_ptr(ptr %at, i64 $copy_dst)
  %src0 = call ptr @load_ptr(ptr %at, i64 $copy_src)
  %np = getelementptr i64, ptr %at, i64 $copy_nbytes
  %n = load i64, ptr %np, align 8
  %indexed = and i64 %flags, $copy_indexed_bit
  %is_indexed = icmp ne i64 %indexed, 0
  br i1 %is_indexed, label %index, label %go
index:
  ; with the flag: the index word, the destination and source strides (bytes), the number of valid indices
  %ip = call ptr @load_ptr(ptr %at, i64 $copy_index_ptr)
  %i = load atomic i64, ptr %ip monotonic, align 8
  %dsp = getelementptr i64, ptr %at, i64 $copy_dst_stride
  %ds = load i64, ptr %dsp, align 8
  %ssp = getelementptr i64, ptr %at, i64 $copy_src_stride
  %ss = load i64, ptr %ssp, align 8
  %cp = getelementptr i64, ptr %at, i64 $copy_count
  %count = load i64, ptr %cp, align 8
  %neg = icmp slt i64 %i, 0
  %over = icmp sge i64 %i, %count
  %bad = or i1 %neg, %over
  br i1 %bad, label %out_of_range, label %offset
out_of_range:
  call void @fault(ptr %ctl, i64 $f_index, i64 %i, i64 %count, i64 0, i64 0)
  ret void
offset:
  %doff = mul i64 %i, %ds
  %dst1 = getelementptr i8, ptr %dst0, i64 %doff
  %soff = mul i64 %i, %ss
  %src1 = getelementptr i8, ptr %src0, i64 %soff
  br label %go
go:
  %dst = phi ptr [%dst0, %entry], [%dst1, %offset]
  %src = phi ptr [%src0, %entry], [%src1, %offset]
  call void @work_begins(ptr %ctl)
  %t0 = call i64 @stamp()
  %r = call ptr @memmove(ptr %dst, ptr %src, i64 %n)
  %t1 = call i64 @stamp()
  call void @record(ptr %ctl, i64 0, i64 %n, i64 %t0, i64 %t1)
  ret void
}

; whether a JUMP is taken: always, or the signed 1/2/4/8-byte word at payload 0 compared with payload 1
define internal i1 @jump_taken(ptr %at, i64 %flags) {
entry:
  %cmp = and i64 %flags, $jump_cmp_mask
  %always = icmp eq i64 %cmp, $jump_always
  br i1 %always, label %yes, label %read
yes:
  ret i1 true
read:
  %p = call ptr @load_ptr(ptr %at, i64 $jump_word_ptr)
  %vp = getelementptr i64, ptr %at, i64 $jump_value
  %value = load i64, ptr %vp, align 8
  %wsh = lshr i64 %flags, $jump_width_shift
  %width = and i64 %wsh, 15
  switch i64 %width, label %w8 [
    i64 1, label %w1
    i64 2, label %w2
    i64 4, label %w4
  ]
w1:
  %b = load atomic i8, ptr %p monotonic, align 1
  %b64 = sext i8 %b to i64
  br label %compare
w2:
  %h = load atomic i16, ptr %p monotonic, align 2
  %h64 = sext i16 %h to i64
  br label %compare
w4:
  %w = load atomic i32, ptr %p monotonic, align 4
  %w64 = sext i32 %w to i64
  br label %compare
w8:
  %q = load atomic i64, ptr %p monotonic, align 8
  br label %compare
compare:
  %x = phi i64 [%b64, %w1], [%h64, %w2], [%w64, %w4], [%q, %w8]
  switch i64 %cmp, label %no [
    i64 $jump_eq, label %eq
    i64 $jump_ne, label %ne
    i64 $jump_lt, label %lt
    i64 $jump_ge, label %ge
  ]
eq:
  %r_eq = icmp eq i64 %x, %value
  ret i1 %r_eq
ne:
  %r_ne = icmp ne i64 %x, %value
  ret i1 %r_ne
lt:
  %r_lt = icmp slt i64 %x, %value
  ret i1 %r_lt
ge:
  %r_ge = icmp sge i64 %x, %value
  ret i1 %r_ge
no:
  ret i1 false
}

; run the n payload words of a BLOCK as packets; its JUMPs move within it (relative to the next packet), so a loop
; replays packets without the host. Returns false if the engine was closed (checked at every backward jump).
define internal i1 @run_block(ptr %ctl, ptr %at, i64 %n) {
entry:
  %closed = call ptr @word(ptr %ctl, i64 $w_closed)
  br label %loop
loop:
  %pos = phi i64 [0, %entry], [%next, %ran], [%next, %not_taken], [%target, %forward], [%target, %open]
  %more = icmp slt i64 %pos, %n
  br i1 %more, label %packet, label %done
packet:
  %hp = getelementptr i64, ptr %at, i64 %pos
  %hdr = load i64, ptr %hp, align 8
  %pat = getelementptr i64, ptr %hp, i64 1
  %op = and i64 %hdr, $op_mask
  %nsh = lshr i64 %hdr, $nwords_shift
  %len = and i64 %nsh, $nwords_mask
  %flags = lshr i64 %hdr, $flags_shift
  %p1 = add i64 %pos, 1
  %next = add i64 %p1, %len
  %fits = icmp sle i64 %next, %n
  br i1 %fits, label %dispatch, label %overrun
overrun:
  call void @fault(ptr %ctl, i64 $f_control, i64 $control_overrun, i64 %pos, i64 %n, i64 0)
  br label %done
dispatch:
  %is_jump = icmp eq i64 %op, $op_jump
  br i1 %is_jump, label %jump, label %run
run:
  %alive = call i1 @run_packet(ptr %ctl, i64 %op, ptr %pat, i64 %flags, i64 %len)
  br i1 %alive, label %ran, label %gone
ran:
  br label %loop
jump:
  %taken = call i1 @jump_taken(ptr %pat, i64 %flags)
  br i1 %taken, label %take, label %not_taken
not_taken:
  br label %loop
take:
  %offp = getelementptr i64, ptr %pat, i64 $jump_offset
  %off = load i64, ptr %offp, align 8
  %target = add i64 %next, %off
  %below = icmp slt i64 %target, 0
  %above = icmp sgt i64 %target, %n
  %outside = or i1 %below, %above
  br i1 %outside, label %bad_target, label %in_block
bad_target:
  call void @fault(ptr %ctl, i64 $f_control, i64 $control_target, i64 %pos, i64 %off, i64 %n)
  br label %done
in_block:
  %back = icmp sle i64 %target, %pos
  br i1 %back, label %check_closed, label %forward
forward:
  br label %loop
check_closed:
  %c = load atomic i64, ptr %closed monotonic, align 8
  %is_closed = icmp ne i64 %c, 0
  br i1 %is_closed, label %gone, label %open
open:
  br label %loop
gone:
  ret i1 false
done:
  ret i1 true
}

; out[0] = EXECs and COPYs running now, out[1] = retired so far: every engine on the board's counts, and what other
; backends counted into the global word
define void @tgfx_progress(ptr %g, ptr %out) {
entry:
  %nbp = call ptr @word(ptr %g, i64 $g_nboard)
  %n = load atomic i64, ptr %nbp acquire, align 8
  %board = call ptr @word(ptr %g, i64 $g_board)
  %gr = call ptr @word(ptr %g, i64 $g_retired)
  %ext = load atomic i64, ptr %gr monotonic, align 8
  br label %scan
scan:
  %i = phi i64 [0, %entry], [%i1, %next]
  %busy = phi i64 [0, %entry], [%busy1, %next]
  %ret = phi i64 [%ext, %entry], [%ret1, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %slot, label %done
slot:
  %ctl = call ptr @load_ptr(ptr %board, i64 %i)
  %empty = icmp eq ptr %ctl, null
  br i1 %empty, label %next, label %count
count:
  %bp = call ptr @word(ptr %ctl, i64 $w_busy)
  %b = load atomic i64, ptr %bp acquire, align 8
  %rp = call ptr @word(ptr %ctl, i64 $w_retired)
  %r = load atomic i64, ptr %rp monotonic, align 8
  %bsum = add i64 %busy, %b
  %rsum = add i64 %ret, %r
  br label %next
next:
  %busy1 = phi i64 [%busy, %slot], [%bsum, %count]
  %ret1 = phi i64 [%ret, %slot], [%rsum, %count]
  %i1 = add i64 %i, 1
  br label %scan
done:
  store i64 %busy, ptr %out, align 8
  %o1 = getelementptr i64, ptr %out, i64 1
  store i64 %ret, ptr %o1, align 8
  ret void
}

; returns false if the engine was closed while waiting
define internal i1 @run_wait(ptr %ctl, ptr %at) {
entry:
  %sig = call ptr @load_ptr(ptr %at, i64 $wait_signal)
  %vp = getelementptr i64, ptr %at, i64 $wait_value
  %value = load i64, ptr %vp, align 8
  %tp = getelementptr i64, ptr %at, i64 $wait_timeout_ns
  %timeout = load i64, ptr %tp, align 8
  %closed = call ptr @word(ptr %ctl, i64 $w_closed)
  %gw = call ptr @load_ptr(ptr %ctl, i64 $w_global)
  %prog = alloca [2 x i64], align 8
  call void @tgfx_progress(ptr %gw, ptr %prog)
  %retp = getelementptr i64, ptr %prog, i64 1
  %mark0 = load i64, ptr %retp, align 8
  %t0 = call i64 @now()
  %deadline0 = add i64 %t0, %timeout
  br label %wait
wait:
  %deadline = phi i64 [%deadline0, %entry], [%deadline, %check_time], [%deadline1, %progressed]
  %mark = phi i64 [%mark0, %entry], [%mark, %check_time], [%retired, %progressed]
  %t = call i64 @now()
  %rem0 = sub i64 %deadline, %t
  %neg = icmp slt i64 %rem0, 0
  %rem = select i1 %neg, i64 0, i64 %rem0
  %long = icmp sgt i64 %rem, $idle_slice
  %slice = select i1 %long, i64 $idle_slice, i64 %rem
  %spin = call ptr @word(ptr %ctl, i64 $w_spin)
  %host = call ptr @word(ptr %ctl, i64 $w_host_cpu)
  %seen = call i64 @adaptive_wait(ptr %sig, i64 %value, i64 %slice, ptr %closed, ptr %spin, i64 $processor_spin,
                                  ptr %host)
  %ok = icmp sge i64 %seen, %value
  br i1 %ok, label %satisfied, label %not_yet
not_yet:
  %c = load atomic i64, ptr %closed monotonic, align 8
  %is_closed = icmp ne i64 %c, 0
  br i1 %is_closed, label %gone, label %check_time
gone:
  ret i1 false
check_time:
  %late = icmp eq i64 %rem, 0
  br i1 %late, label %stalled, label %wait
stalled:
  ; the timeout passed: it is a stall only if no EXEC or COPY runs anywhere and none retired since the last mark
  call void @tgfx_progress(ptr %gw, ptr %prog)
  %running = load i64, ptr %prog, align 8
  %retired = load i64, ptr %retp, align 8
  %busy = icmp sgt i64 %running, 0
  %moved = icmp ne i64 %retired, %mark
  %alive = or i1 %busy, %moved
  %tn = call i64 @now()
  %deadline1 = add i64 %tn, %timeout
  br i1 %alive, label %progressed, label %timed_out
progressed:
  br label %wait
timed_out:
  %sigi = ptrtoint ptr %sig to i64
  call void @fault(ptr %ctl, i64 $f_wait_timeout, i64 %sigi, i64 %value, i64 %seen, i64 %timeout)
  ret i1 true
satisfied:
  ; a fault upstream of the signal poisons this submission, except the previous one of this device (its own)
  %tl = call ptr @load_ptr(ptr %ctl, i64 $w_timeline)
  %own = icmp eq ptr %tl, %sig
  br i1 %own, label %done, label %inherit
inherit:
  %g = call ptr @load_ptr(ptr %ctl, i64 $w_global)
  %ep = getelementptr i64, ptr %sig, i64 $s_error
  %e = load atomic i64, ptr %ep acquire, align 8
  %elive = call i1 @live(ptr %g, i64 %e)
  %pp = call ptr @word(ptr %ctl, i64 $w_poison)
  %p = load i64, ptr %pp, align 8
  %clean = icmp eq i64 %p, 0
  %take = and i1 %elive, %clean
  br i1 %take, label %poison, label %done
poison:
  store i64 %e, ptr %pp, align 8
  br label %done
done:
  ret i1 true
}

; returns false if the engine was closed during the packet
define internal i1 @run_packet(ptr %ctl, i64 %op, ptr %at, i64 %flags, i64 %n) {
entry:
  switch i64 %op, label %bad [
    i64 $op_nop, label %ok
    i64 $op_exec, label %exec
    i64 $op_copy, label %copy
    i64 $op_wait, label %wait
    i64 $op_signal, label %signal
    i64 $op_timestamp, label %timestamp
    i64 $op_barrier, label %barrier
    i64 $op_block, label %block
    i64 $op_jump, label %stray_jump
    i64 $op_write, label %write
    i64 $op_add, label %add
  ]
exec:
  call void @run_exec(ptr %ctl, ptr %at, i64 %flags)
  br label %ok
copy:
  call void @run_copy(ptr %ctl, ptr %at, i64 %flags)
  br label %ok
wait:
  %alive = call i1 @run_wait(ptr %ctl, ptr %at)
  ret i1 %alive
signal:
  %sig = call ptr @load_ptr(ptr %at, i64 $signal_signal)
  %vp = getelementptr i64, ptr %at, i64 $signal_value
  %v = load i64, ptr %vp, align 8
  call void @write_signal(ptr %ctl, ptr %sig, i64 %v)
  br label %ok
timestamp:
  %tsig = call ptr @load_ptr(ptr %at, i64 $timestamp_signal)
  %t = call i64 @now()
  call void @write_signal(ptr %ctl, ptr %tsig, i64 %t)
  br label %ok
barrier:
  fence seq_cst
  br label %ok
block:
  %block_alive = call i1 @run_block(ptr %ctl, ptr %at, i64 %n)
  ret i1 %block_alive
stray_jump:
  call void @fault(ptr %ctl, i64 $f_control, i64 $control_outside_block, i64 0, i64 0, i64 0)
  br label %ok
write:
  %wp = call ptr @load_ptr(ptr %at, i64 $write_word_ptr)
  %wvp = getelementptr i64, ptr %at, i64 $write_value
  %wv = load i64, ptr %wvp, align 8
  store atomic i64 %wv, ptr %wp monotonic, align 8
  br label %ok
add:
  %ap = call ptr @load_ptr(ptr %at, i64 $add_word_ptr)
  %avp = getelementptr i64, ptr %at, i64 $add_value
  %av = load i64, ptr %avp, align 8
  %old = load atomic i64, ptr %ap monotonic, align 8
  %new = add i64 %old, %av
  store atomic i64 %new, ptr %ap monotonic, align 8
  br label %ok
bad:
  call void @fault(ptr %ctl, i64 $f_opcode, i64 %op, i64 0, i64 0, i64 0)
  br label %ok
ok:
  ret i1 true
}

; run `n` words of packets on the calling thread, as the engine's processor would (a submission that runs inline,
; see HCQDevice.submit): the caller guarantees the engine is idle and stays so, and that no packet is a WAIT. A
; command buffer's packets are walked as a BLOCK's are (its own JUMPs are all inside BLOCK packets).
define void @tgfx_run_inline(ptr %ctl, ptr %words, i64 %n) {
  %alive = call i1 @run_block(ptr %ctl, ptr %words, i64 %n)
  ret void
}

; ---- threads

; one engine's command processor: consume packets in order until closed
define ptr @tgfx_processor(ptr %ctl) {
entry:
  %ring = call ptr @load_ptr(ptr %ctl, i64 $w_ring)
  %nwp = call ptr @word(ptr %ctl, i64 $w_nwords)
  %nwords = load i64, ptr %nwp, align 8
  %wptr = call ptr @word(ptr %ctl, i64 $w_wptr)
  %rptr = call ptr @word(ptr %ctl, i64 $w_rptr)
  %closed = call ptr @word(ptr %ctl, i64 $w_closed)
  %spin = call ptr @word(ptr %ctl, i64 $w_spin)
  %host = call ptr @word(ptr %ctl, i64 $w_host_cpu)
  %mine = call ptr @word(ptr %ctl, i64 $w_processor_cpu)
  br label %loop
loop:
  %c = load atomic i64, ptr %closed monotonic, align 8
  %is_closed = icmp ne i64 %c, 0
  br i1 %is_closed, label %exit, label %poll
poll:
  %r = load atomic i64, ptr %rptr monotonic, align 8
  %w = load atomic i64, ptr %wptr acquire, align 8
  %empty = icmp eq i64 %r, %w
  br i1 %empty, label %idle, label %packet
idle:
  %r1 = add i64 %r, 1
  %seen = call i64 @adaptive_wait(ptr %wptr, i64 %r1, i64 $idle_slice, ptr %closed, ptr %spin, i64 $processor_spin,
                                  ptr %host)
  br label %loop
packet:
  %cpu = call i32 @sched_getcpu()
  %cpu64 = sext i32 %cpu to i64
  store atomic i64 %cpu64, ptr %mine monotonic, align 8
  %pos = urem i64 %r, %nwords
  %hp = getelementptr i64, ptr %ring, i64 %pos
  %hdr = load i64, ptr %hp, align 8
  %at = getelementptr i64, ptr %hp, i64 1
  %op = and i64 %hdr, $op_mask
  %nsh = lshr i64 %hdr, $nwords_shift
  %n = and i64 %nsh, $nwords_mask
  %flags = lshr i64 %hdr, $flags_shift
  %alive = call i1 @run_packet(ptr %ctl, i64 %op, ptr %at, i64 %flags, i64 %n)
  br i1 %alive, label %advance, label %exit
advance:
  %r2 = add i64 %r, 1
  %r3 = add i64 %r2, %n
  call void @tgfx_store_wake(ptr %rptr, i64 %r3)
  br label %loop
exit:
  %ex = call ptr @word(ptr %ctl, i64 $w_exited)
  call void @tgfx_store_wake(ptr %ex, i64 1)
  ret ptr null
}

; a pool thread: join the parallel jobs engines post on the board, sleep on the epoch when there are none
define ptr @tgfx_helper(ptr %g) {
entry:
  %sd = call ptr @word(ptr %g, i64 $g_shutdown)
  %ep = call ptr @word(ptr %g, i64 $g_epoch)
  %nbp = call ptr @word(ptr %g, i64 $g_nboard)
  %board = call ptr @word(ptr %g, i64 $g_board)
  %spin = alloca [2 x i64], align 8
  store [2 x i64] zeroinitializer, ptr %spin, align 8
  br label %loop
loop:
  %s = load atomic i64, ptr %sd monotonic, align 8
  %stop = icmp ne i64 %s, 0
  br i1 %stop, label %exit, label %scan_start
scan_start:
  %e = load atomic i64, ptr %ep acquire, align 8
  %n = load atomic i64, ptr %nbp acquire, align 8
  br label %scan
scan:
  %i = phi i64 [0, %scan_start], [%i1, %next]
  %worked = phi i1 [false, %scan_start], [%worked1, %next]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %slot, label %scanned
slot:
  %job = call ptr @load_ptr(ptr %board, i64 %i)
  %empty = icmp eq ptr %job, null
  br i1 %empty, label %next, label %try
try:
  %did = call i1 @help(ptr %job)
  br label %next
next:
  %d = phi i1 [false, %slot], [%did, %try]
  %worked1 = or i1 %worked, %d
  %i1 = add i64 %i, 1
  br label %scan
scanned:
  br i1 %worked, label %loop, label %sleep
sleep:
  %e1 = add i64 %e, 1
  %seen = call i64 @adaptive_wait(ptr %ep, i64 %e1, i64 $idle_slice, ptr %sd, ptr %spin, i64 $helper_spin, ptr null)
  br label %loop
exit:
  ret ptr null
}
