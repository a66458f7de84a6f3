/* results: the records. Each record's columns are listed once here, as an X-macro X(KIND, name)
 * with KIND STR (const char *), INT (int64_t) or F64 (double); the list gives the row struct
 * res_<record>_row, the CSV/JSONL column order and the schema descriptor res_schema_<record>()
 * that the table writer and reader take. Included by res.h only.
 *
 * Every column is required of a file of the current schema except STR_OPT, INT_OPT and F64_OPT
 * ones, added after the record's first files (an older file reads them as not measured). A new
 * column of schema 1 must be optional; a required one needs a new schema version. The columns'
 * meanings are in docs/records.md. */
#ifndef FABENCH_RES_REC_H
#define FABENCH_RES_REC_H

/* allreduce.csv: one row per (transport, algorithm, dtype, op, size). t_pred_us and pred_err:
 * the cost model's prediction of t_p50_us and (measured - predicted) / predicted; host_cpu_us:
 * rank 0's host's CPU time per call, where no rank spins; round_spread: with --rounds, how far
 * the rounds' medians spread; compute_loss: with --beside-compute, the pace a computing thread
 * lost (such rows stay out of the link's fit); ranks_per_host: with host_count, the layout;
 * bound, link_util, cpu_busy, tcp_retrans: with --telemetry-hz, what bound the size's
 * measurement (all its transport/algorithm pairs, taking turns) on the worst host, as train's. */
#define RES_ALLREDUCE_COLS(X)                                                                 \
  X(STR, run_id) X(INT, schema) X(INT, host_count) X(INT, ranks) X(STR, fabric)               \
  X(STR, transport) X(STR, algo) X(STR, dtype) X(STR, op) X(INT, bytes) X(INT, count)         \
  X(INT, iters) X(STR, timing) X(F64, t_min_us) X(F64, t_p50_us) X(F64, t_p90_us)             \
  X(F64, t_p99_us) X(F64, t_max_us) X(F64, t_mean_us) X(F64, t_std_us) X(F64, algbw_gbps)     \
  X(F64, busbw_gbps) X(INT, errors) X(STR, algo_ran) X(STR, host) X(STR, topo_hash)           \
  X(INT, warmup) X(INT, chunk_bytes) X(INT, tcp_streams) X(STR, boot) X(INT_OPT, rounds)      \
  X(STR_OPT, peer) X(F64_OPT, busbw_vs_peer) X(F64_OPT, t_pred_us) X(F64_OPT, pred_err)       \
  X(F64_OPT, host_cpu_us) X(F64_OPT, round_spread) X(F64_OPT, compute_loss)                  \
  X(INT_OPT, ranks_per_host) X(STR_OPT, bound) X(F64_OPT, link_util) X(F64_OPT, cpu_busy)     \
  X(F64_OPT, tcp_retrans) X(STR_OPT, pred_kind)

/* colls.csv: the other collectives (reduce-scatter, all-gather, broadcast, all-to-all), one row
 * per (collective, transport, algorithm, dtype, op, size): allreduce.csv's columns, then the
 * collective's name, broadcast's root and all-to-all's imbalance (0: even counts). bytes
 * is nccl-tests' size: the whole vector (all-gather's output, reduce-scatter's input), the
 * broadcast buffer, or what one rank sends in all (all-to-all). */
#define RES_COLLS_COLS(X) RES_ALLREDUCE_COLS(X) X(STR, coll) X(INT, root) X(F64, imbalance)

/* coll_ranks.csv: each rank's own time of a collective (the allreduce and the others), one row
 * per (collective, transport, algorithm, dtype, op, size, rank), barrier timing and several
 * ranks only. Every iteration starts behind a barrier and ends when the last rank's data is in,
 * so a rank that arrives late waits least: wait_us = this rank's median - the fastest rank's
 * median, and the straggler is the rank with wait_us 0 while the others wait for it. */
#define RES_COLL_RANKS_COLS(X)                                                                \
  X(STR, run_id) X(INT, schema) X(STR, coll) X(STR, transport) X(STR, algo) X(STR, dtype)     \
  X(STR, op) X(INT, bytes) X(INT, ranks) X(INT, rank) X(STR, host) X(F64, t_p50_us)           \
  X(F64, wait_us)

/* allreduce_groups.csv: `allreduce --pairs` and `--nodes`, an all-reduce inside groups of ranks
 * (disjoint groups at once), one row per (transport, algorithm, dtype, group, size). group: pair
 * (ranks src and dst), node (the ranks of host src_host alone; dst -1, dst_host = src_host) or
 * node-ref (the ranks of src_host with those of the reference host dst_host; src, dst their
 * first ranks); round: the step the group ran in (groups of one step ran at once); times are the
 * slowest member's per iteration; busbw = algbw x 2(n-1)/n over the group's n ranks. */
#define RES_ALLREDUCE_GROUPS_COLS(X)                                                          \
  X(STR, run_id) X(INT, schema) X(STR, fabric) X(STR, transport) X(STR, algo) X(STR, dtype)   \
  X(STR, mode) X(STR, group) X(INT, round) X(INT, src) X(INT, dst) X(STR, src_host)           \
  X(STR, dst_host) X(INT, ranks) X(INT, bytes) X(INT, iters) X(F64, t_p50_us)                 \
  X(F64, t_p99_us) X(F64, algbw_gbps) X(F64, busbw_gbps) X(INT, errors) X(STR, topo_hash)

/* p2p.csv: one row per (transport, test, pair, size); latency is one-way. */
#define RES_P2P_COLS(X)                                                                       \
  X(STR, run_id) X(INT, schema) X(INT, ranks) X(STR, fabric) X(STR, transport) X(STR, test)   \
  X(INT, src) X(INT, dst) X(INT, bytes) X(INT, iters) X(F64, t_min_us) X(F64, t_p50_us)       \
  X(F64, t_p99_us) X(F64, t_max_us) X(F64, gbps) X(STR, host) X(STR, topo_hash)               \
  X(INT, window) X(F64, t_mean_us) X(F64, t_stddev_us) X(F64, gbps_mean) X(F64, gbit_s)       \
  X(INT, errors) X(STR, src_host) X(STR, dst_host) X(STR, link)

/* p2p_matrix.csv: the all-pairs matrices in tidy form, one row per (transport, metric,
 * src, dst); metric bw_gbps (at the largest size) or latency_us (at the smallest). */
#define RES_P2P_MATRIX_COLS(X)                                                                \
  X(STR, run_id) X(INT, schema) X(INT, ranks) X(STR, transport) X(STR, fabric)                \
  X(STR, metric) X(INT, bytes) X(INT, src) X(INT, dst) X(F64, value) X(STR, src_host)         \
  X(STR, dst_host)

/* train.csv: one row per training run (per rank role). With --rounds R the pairs took turns R
 * times, each round training the same steps from the same weights: the row is the pair's fastest
 * round (rounds: R), images_per_s_slowest its slowest round's figure (one round: the same). dp:
 * replicated, sharded (ZeRO stage 2) or sharded3 (stage 3); sent_mb_step: what each rank sends
 * per step by the algorithms' bus factors (MB, 10^6 bytes); state_mb: the parameters,
 * gradients and optimizer state each rank keeps between steps (MB); peak_mb: the same at its
 * most during a step (stage 3: with the buckets gathered then). bound: with --telemetry-hz, what bound the pair's last round on
 * the worst host (link-bound, cpu-bound or neither); link_util the most utilised link's,
 * cpu_busy the busiest host's, tcp_retrans all hosts' retransmits. */
#define RES_TRAIN_COLS(X)                                                                     \
  X(STR, run_id) X(INT, schema) X(STR, host) X(INT, host_count) X(STR, topo_hash)             \
  X(INT, ranks) X(STR, role) X(STR, fabric) X(STR, transport) X(STR, algo) X(STR, model)      \
  X(INT, params) X(STR, data) X(STR, input) X(INT, classes) X(STR, device) X(INT, batch)      \
  X(INT, global_batch) X(INT, threads) X(F64, bucket_mb) X(F64, first_bucket_mb)              \
  X(INT, buckets) X(INT, overlap) X(INT_OPT, overlap_step) X(STR, grad_dtype) X(INT, grad_bytes) \
  X(INT, epochs) X(INT, steps) X(INT, measured_steps) X(INT, warmup_steps) X(F64, lr)         \
  X(STR, lr_schedule) X(F64, warmup_epochs) X(F64, momentum) X(F64, wd) X(INT, nesterov)      \
  X(STR, augment) X(INT, seed) X(F64, images_per_s) X(F64, images_per_s_rank)                 \
  X(F64, compute_images_per_s)                                                                \
  X(F64, step_ms) X(F64, step_ms_mean) X(F64, step_ms_p90) X(F64, data_ms) X(F64, load_ms)    \
  X(F64, fwd_ms) X(F64, bwd_ms) X(F64, comm_ms) X(F64_OPT, comm_cpu_ms) X(F64, exposed_comm_ms) \
  X(F64, opt_ms) X(F64, imbalance_ms) X(F64, comm_busbw_gbps) X(F64, scaling_eff)             \
  X(F64, fabric_eff) X(F64, final_loss) X(F64, test_loss) X(F64, test_acc) X(F64, target_acc) \
  X(F64, time_to_target_s) X(F64, train_time_s) X(INT, start_step) X(INT, end_step)           \
  X(STR, backend) X(STR, status) X(F64, step_ms_pred) X(F64, images_per_s_pred)               \
  X(F64, exposed_comm_ms_pred) X(F64, pred_err) X(INT_OPT, rounds)                          \
  X(F64_OPT, images_per_s_slowest) X(INT_OPT, ranks_per_host) X(STR_OPT, dp)               \
  X(F64_OPT, sent_mb_step) X(F64_OPT, state_mb) X(STR_OPT, bound) X(F64_OPT, link_util)      \
  X(F64_OPT, cpu_busy) X(F64_OPT, tcp_retrans) X(STR_OPT, pred_kind) X(INT_OPT, setting)      \
  X(STR_OPT, optimizer) X(INT_OPT, loader_workers) X(F64_OPT, data_wait_ms)                   \
  X(F64_OPT, loader_mb_s) X(F64_OPT, loader_images_s) X(STR_OPT, cache) X(F64_OPT, peak_mb)

/* train_epochs.csv: a sweep's accuracy after each evaluated epoch, one row per (setting, role,
 * pair, device, evaluation), with every setting of the row it belongs to in train.csv; epoch:
 * the epochs trained when it was evaluated (a fraction for a run cut by --steps). */
#define RES_TRAIN_EPOCHS_COLS(X)                                                              \
  X(STR, run_id) X(INT, schema) X(INT, setting) X(STR, role) X(STR, transport) X(STR, algo)   \
  X(STR, device) X(INT, ranks) X(INT, batch) X(INT, global_batch) X(F64, lr) X(STR, optimizer) \
  X(INT, epochs) X(INT, threads) X(INT, loader_workers) X(F64, epoch) X(INT, step)             \
  X(F64, test_acc) X(F64, test_loss) X(F64, elapsed_s) X(INT, round)

/* train_steps.csv: one row per rank and step (round: of --rounds, from 1). */
#define RES_TRAIN_STEPS_COLS(X)                                                               \
  X(STR, run_id) X(INT_OPT, schema) X(INT, rank) X(STR, host) X(STR, transport) X(STR, algo)  \
  X(INT, step) X(INT, epoch) X(INT, step_in_epoch) X(INT, images) X(F64, loss)                \
  X(F64, batch_acc) X(F64, lr) X(F64, step_ms) X(F64, data_ms) X(F64, load_ms) X(F64, fwd_ms) \
  X(F64, bwd_ms) X(F64, comm_ms) X(F64_OPT, comm_cpu_ms) X(F64, exposed_comm_ms) X(F64, opt_ms) \
  X(F64, images_per_s) X(INT, warmup) X(F64, elapsed_s) X(INT_OPT, round)

/* train_eval.csv: one row per evaluation on the test set (round: of --rounds, from 1). */
#define RES_TRAIN_EVAL_COLS(X)                                                                \
  X(STR, run_id) X(INT_OPT, schema) X(STR, transport) X(STR, algo) X(INT, epoch) X(INT, step) \
  X(F64, test_loss) X(F64, test_acc) X(INT, test_images) X(F64, eval_s) X(F64, elapsed_s)     \
  X(INT_OPT, round)

/* train_buckets.csv: one row per gradient bucket. ready_ms: median time from the start of
 * backward until the bucket's gradients are complete; comm_ms: median all-reduce time of the
 * bucket; done_ms: median time from the start of backward until it is reduced. */
#define RES_TRAIN_BUCKETS_COLS(X)                                                             \
  X(STR, run_id) X(INT_OPT, schema) X(STR, role) X(STR, transport) X(STR, algo) X(INT, ranks) \
  X(INT, bucket) X(INT, offset_bytes) X(INT, bytes) X(F64, ready_ms) X(F64, comm_ms)          \
  X(F64, done_ms)

/* train_partition.csv: `train --mode partitioned`, one row per way of training the same fully
 * connected network: mode conventional (one rank), data-parallel, partitioned (each part on its
 * own rank, synthetic intermediate labels). epoch_s: training wall time per epoch (the slowest
 * rank); fabric_bytes_per_epoch: bytes all ranks sent over the fabric while training, per epoch;
 * infer_fabric_bytes: bytes one pass over the test set sent (the cut's activations);
 * recovery_fabric_bytes: what joining the parts for the recovery epochs sent; peak_rss_max_bytes:
 * the largest of the ranks' peak resident memory during this mode (peak_rss_rank0/1_bytes each);
 * test_acc: the mode's final test accuracy, for partitioned the joined network's after the
 * recovery epochs (test_acc_before_recovery: the parts in sequence before them). */
#define RES_TRAIN_PARTITION_COLS(X)                                                           \
  X(STR, run_id) X(INT, schema) X(STR, mode) X(STR, model) X(STR, data) X(INT, ranks)         \
  X(INT, parts) X(INT, cut_layer) X(INT, cut_width) X(INT, params) X(INT, epochs)             \
  X(INT, recovery_epochs) X(INT, batch) X(F64, lr) X(INT, threads) X(STR, fabric)              \
  X(F64, test_acc) X(F64, test_acc_before_recovery) X(F64, epoch_s) X(F64, train_s)           \
  X(F64, recovery_s) X(INT, fabric_bytes_per_epoch) X(INT, infer_fabric_bytes)                \
  X(INT, recovery_fabric_bytes) X(INT, peak_rss_max_bytes) X(INT, peak_rss_rank0_bytes)       \
  X(INT, peak_rss_rank1_bytes) X(F64, final_loss)

/* predict.csv: one row per (rank count, algorithm) of `fabench predict`. inter_gbps_needed:
 * the inter-node link rate (GB/s) at which the step reaches target_eff (inf: not by the link;
 * 0: at any rate, the link does not bound it). pred_kind (here and in train.csv): replay or
 * held-out (res_pred_kind). */
#define RES_PREDICT_COLS(X)                                                                   \
  X(STR, run_id) X(INT, schema) X(STR, model) X(INT, grad_bytes) X(INT, buckets) X(INT, batch) \
  X(INT, ranks) X(INT, ranks_per_node) X(INT, nodes) X(STR, algo) X(STR, intra) X(STR, inter) \
  X(INT, overlap) X(F64, compute_ms) X(F64, step_ms) X(F64, comm_ms) X(F64, exposed_comm_ms)  \
  X(F64, images_per_s) X(F64, scaling_eff) X(F64, inter_gbps) X(F64, target_eff)              \
  X(F64, inter_gbps_needed) X(STR_OPT, pred_kind)

/* model_check.csv: `fabench fit --check`, one row per all-reduce row predicted by a model it
 * may not have been fitted on. pred_err = (t_p50_us - t_pred_us) / t_pred_us. */
#define RES_MODEL_CHECK_COLS(X)                                                               \
  X(STR, run_id) X(INT, schema) X(STR, fabric) X(STR, transport) X(INT, host_count)           \
  X(INT, ranks) X(STR, algo) X(INT, bytes) X(F64, t_p50_us) X(F64, t_pred_us) X(F64, pred_err)

/* validate.csv: `fabench validate`, one row per measured figure of a cell (the all-reduce at a
 * size, or the training step): split train (fitted on), held-out or repeat; held what the cell
 * holds out (rate, nodes, both; "" for a training cell); t_* in ms: measured, the model's
 * prediction and the two baselines (compute alone: the no-communication step, 0 for an
 * all-reduce; bytes over the link: that plus the ring's bytes at the link's rate, no overlap);
 * err_* = (prediction - measured) / measured; comm_share: the step's share over the compute
 * alone; t_repeat: the same cell measured again (the machine's own repeatability). */
#define RES_VALIDATE_COLS(X)                                                                  \
  X(STR, run_id) X(INT, schema) X(STR, cell) X(STR, split) X(STR, held) X(STR, fabric)        \
  X(INT, nodes) X(INT, ranks_per_node) X(INT, ranks) X(STR, algo) X(STR, model) X(STR, what)  \
  X(INT, bytes) X(F64, t_meas) X(F64, t_pred) X(STR, pred_kind) X(F64, err) X(F64, t_compute) \
  X(F64, err_compute) X(F64, t_bytes_link) X(F64, err_bytes_link) X(F64, comm_share)           \
  X(F64, t_repeat) X(F64, err_repeat)

/* validate_ablation.csv: per term of the model (res_term_name; "none": the whole model) and
 * figure (allreduce, step), the held-out cells' median and worst |err| with every term and with
 * that term off. */
#define RES_VALIDATE_ABLATION_COLS(X)                                                         \
  X(STR, run_id) X(INT, schema) X(STR, term) X(STR, what) X(INT, n) X(F64, median_with)       \
  X(F64, median_without) X(F64, worst_with) X(F64, worst_without)

/* suite_check.csv: `fabench suite`'s figures set beside a prediction made without them, one row
 * per check: check whatif (a measured emulated rate priced from the slower fitted one) or
 * heldout (the suite's own check: a middle rate on two nodes, predicted before it ran); fabric
 * the measured one, from the fitted fabric it was priced from; images/s of all ranks;
 * err = (pred - meas) / meas; pred_kind replay or held-out (res_pred_kind). */
#define RES_SUITE_CHECK_COLS(X)                                                               \
  X(STR, run_id) X(INT, schema) X(STR, check) X(STR, fabric) X(STR, from) X(INT, nodes)       \
  X(INT, ranks) X(STR, algo) X(STR, model) X(F64, images_s_pred) X(F64, images_s_meas)        \
  X(F64, err) X(STR, pred_kind)

/* Every record: R(name, COLUMNS). The name is the base of its files (<name>.csv, .jsonl). */
#define RES_RECORDS(R)                                                                        \
  R(allreduce, RES_ALLREDUCE_COLS)                                                            \
  R(allreduce_groups, RES_ALLREDUCE_GROUPS_COLS)                                              \
  R(colls, RES_COLLS_COLS)                                                                    \
  R(coll_ranks, RES_COLL_RANKS_COLS)                                                          \
  R(p2p, RES_P2P_COLS)                                                                        \
  R(p2p_matrix, RES_P2P_MATRIX_COLS)                                                          \
  R(train, RES_TRAIN_COLS)                                                                    \
  R(train_steps, RES_TRAIN_STEPS_COLS)                                                        \
  R(train_eval, RES_TRAIN_EVAL_COLS)                                                          \
  R(train_epochs, RES_TRAIN_EPOCHS_COLS)                                                      \
  R(train_buckets, RES_TRAIN_BUCKETS_COLS)                                                    \
  R(train_partition, RES_TRAIN_PARTITION_COLS)                                                \
  R(predict, RES_PREDICT_COLS)                                                                \
  R(model_check, RES_MODEL_CHECK_COLS)                                                        \
  R(validate, RES_VALIDATE_COLS)                                                              \
  R(validate_ablation, RES_VALIDATE_ABLATION_COLS)                                            \
  R(suite_check, RES_SUITE_CHECK_COLS)

#define RES_CTYPE_STR const char *
#define RES_CTYPE_INT int64_t
#define RES_CTYPE_F64 double
#define RES_CTYPE_STR_OPT const char *
#define RES_CTYPE_INT_OPT int64_t
#define RES_CTYPE_F64_OPT double
#define RES_FIELD_(kind, name) RES_CTYPE_##kind name;
#define RES_ROW_TYPE_(rec, COLS)                                                              \
  typedef struct {                                                                            \
    COLS(RES_FIELD_)                                                                          \
  } res_##rec##_row;                                                                          \
  const res_schema *res_schema_##rec(void);
RES_RECORDS(RES_ROW_TYPE_)
#undef RES_ROW_TYPE_

#endif
