"""Training through the C API next to Python Accelerate, step by step, on the same TorchScript models,
weights and data: each scenario runs once with `accelerate.Accelerator` and once through
libaccelerate (acc_ctypes.py); the losses, learning rates, gradient norms, an evaluation gathered
with gather_for_metrics and the final weights are compared, and the files save_model writes (read
by Python's safetensors, then byte by byte). Needs PyTorch and Accelerate in the python that runs
it: `scripts/check-debian13.sh --accelerate` (Debian 13's torch 2.6 and Accelerate's sources), or
a machine with both installed (scripts/gpu/test.sh). On the CPU unless ACC_SIDE_BY_SIDE_DEVICE=cuda.

  side_by_side.py export DIR                       models and data into DIR
  side_by_side.py run SIDE SCENARIO DIR            SIDE: accelerate or ours; one process of the job
                                                   (launched by torchrun / accelerate-launch)
  side_by_side.py compare SCENARIO DIR PROCESSES   exit 1 when any value differs
  side_by_side.py list [SCENARIO...]               the scenarios to run (those given, else all but
                                                   the GPU's own on the CPU, and the uninterrupted
                                                   runs resumed ones are held to)
"""
import copy
import ctypes
import json
import math
import os
import re
import sys
import types

import torch
import torch.nn.functional as F

SCENARIOS = {
    # An MLP with dropout (the global generator's stream), AdamW, transformers' linear warmup, an
    # unseeded shuffle over two epochs.
    "mlp": dict(model="mlp", optimizer="adamw", schedule="linear"),
    "mlp_accumulate_clip": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=2, clip=0.5),
    "mlp_bf16": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="bf16"),
    # Resumed under bf16: without the JIT's optimisation, as a reloaded TorchScript model profiles its
    # first runs anew (other kernels, on both sides alike, so a resumed run is not its uninterrupted one).
    "mlp_bf16_plain_graph": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                                 graph_optimization=False, accumulation=2),
    "mlp_bf16_resume": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                            graph_optimization=False, accumulation=2, resume=True, resume_at=2,
                            uninterrupted="mlp_bf16_plain_graph"),
    # Seedable shuffling (Accelerate's use_seedable_sampler with data_seed: epoch e shuffles with
    # seed + e): the accelerator's data_seed here, or the loader's own seed.
    "mlp_seedable_sampler": dict(model="mlp", optimizer="sgd", schedule="cosine", data_seed=11),
    "mlp_loader_seed": dict(model="mlp", optimizer="sgd", schedule="cosine", data_seed=11, loader_seed=True),
    # A causal transformer LM (TorchScript, dropout inside attention and the feed-forward), SGD
    # with momentum and a cosine schedule.
    "lm": dict(model="lm", optimizer="sgd", schedule="cosine"),
    # save_state after the first epoch, everything made anew, load_state, the second epoch: the same
    # numbers as without the break.
    "mlp_resume": dict(model="mlp", optimizer="adamw", schedule="linear", resume=True, uninterrupted="mlp"),
    # Saved after 5 batches inside the loop: on 2 processes the epoch's last, and the loop that goes
    # on in that epoch skips them all (its rest is empty), then the next epoch comes whole.
    "mlp_resume_at_epoch_end": dict(model="mlp", optimizer="adamw", schedule="linear", resume=True, resume_at=5,
                                    uninterrupted="mlp"),
    "mlp_seedable_resume": dict(model="mlp", optimizer="adamw", schedule="linear", data_seed=11, resume=True),
    # Resumed in the middle of the first epoch (Accelerate: skip_first_batches).
    "mlp_seedable_resume_mid_epoch": dict(model="mlp", optimizer="sgd", schedule="cosine", data_seed=11,
                                          resume=True, resume_at=2, uninterrupted="mlp_seedable_sampler"),
    "lm_resume_mid_epoch": dict(model="lm", optimizer="sgd", schedule="cosine", resume=True, resume_at=1,
                                uninterrupted="lm"),
    # Handed over: our side trains up to the save (python_state_files), Python Accelerate loads our
    # checkpoint with its load_state and trains on; that run must be Accelerate's uninterrupted one,
    # or, resumed mid-epoch, Accelerate resuming its own checkpoint (`accelerate_resume`: it does not
    # save its shuffle's generator, accelerate#3242; on several processes that is every resume).
    # Both sides' process groups meet at torchrun's store, each under its own prefix.
    "mlp_handover": dict(model="mlp", optimizer="adamw", schedule="linear", resume=True, handover=True,
                         uninterrupted="mlp", resume_on_several="mlp_resume", processes=(1, 2)),
    "lm_handover_mid_epoch": dict(model="lm", optimizer="sgd", schedule="cosine", resume=True, resume_at=1,
                                  handover=True, uninterrupted="lm", accelerate_resume="lm_resume_mid_epoch",
                                  processes=(1, 2)),
    "mlp_accumulate_clip_handover": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=2, clip=0.5,
                                         resume=True, handover=True, uninterrupted="mlp_accumulate_clip",
                                         resume_on_several="mlp_accumulate_clip_resume", processes=(1, 2)),
    "mlp_bf16_handover": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                              graph_optimization=False, accumulation=2, resume=True, resume_at=2, handover=True,
                              uninterrupted="mlp_bf16_plain_graph", accelerate_resume="mlp_bf16_resume",
                              processes=(1, 2)),
    # Two parameter groups (no weight decay on biases) under PyTorch's StepLR and ReduceLROnPlateau
    # (its best metric and counters); Adagrad's state from its start.
    "mlp_group_lr_step_handover": dict(model="mlp", optimizer="sgd", schedule="step", no_decay="*.bias",
                                       group_lr=0.01, resume=True, handover=True, uninterrupted="mlp_group_lr_step",
                                       resume_on_several="mlp_group_lr_step_resume", processes=(1, 2)),
    "mlp_group_lr_plateau_handover": dict(model="mlp", optimizer="sgd", schedule="reduce_lr_on_plateau",
                                          no_decay="*.bias", group_lr=0.2,
                                          schedule_options={"patience": 0, "factor": 0.5, "threshold": 0.5},
                                          resume=True, handover=True, uninterrupted="mlp_group_lr_plateau",
                                          resume_on_several="mlp_group_lr_plateau_resume", processes=(1, 2)),
    "mlp_adagrad_step_handover": dict(model="mlp", optimizer="adagrad", schedule="step", resume=True, handover=True,
                                      uninterrupted="mlp_adagrad_step", resume_on_several="mlp_adagrad_step_resume",
                                      processes=(1, 2)),
    # Taken over: Accelerate trains up to its own save_state, our side's load_state reads that folder
    # (optimizer.bin, scheduler.bin, random_states_<rank>.pkl ...) and trains on; held to Accelerate's
    # uninterrupted run, and on several processes to Accelerate resuming its own checkpoint (which,
    # as the folder, lacks the shuffle's generator: above).
    "mlp_takeover": dict(model="mlp", optimizer="adamw", schedule="linear", resume=True, takeover=True,
                         uninterrupted="mlp", resume_on_several="mlp_resume", processes=(1, 2)),
    "mlp_accumulate_clip_takeover": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=2, clip=0.5,
                                         resume=True, takeover=True, uninterrupted="mlp_accumulate_clip",
                                         resume_on_several="mlp_accumulate_clip_resume", processes=(1, 2)),
    "mlp_bf16_takeover": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                              graph_optimization=False, accumulation=2, resume=True, takeover=True,
                              uninterrupted="mlp_bf16_plain_graph", resume_on_several="mlp_bf16_epoch_resume",
                              processes=(1, 2)),
    "mlp_group_lr_step_takeover": dict(model="mlp", optimizer="sgd", schedule="step", no_decay="*.bias",
                                       group_lr=0.01, resume=True, takeover=True, uninterrupted="mlp_group_lr_step",
                                       resume_on_several="mlp_group_lr_step_resume", processes=(1, 2)),
    "mlp_group_lr_plateau_takeover": dict(model="mlp", optimizer="sgd", schedule="reduce_lr_on_plateau",
                                          no_decay="*.bias", group_lr=0.2,
                                          schedule_options={"patience": 0, "factor": 0.5, "threshold": 0.5},
                                          resume=True, takeover=True, uninterrupted="mlp_group_lr_plateau",
                                          resume_on_several="mlp_group_lr_plateau_resume", processes=(1, 2)),
    "mlp_adagrad_step_takeover": dict(model="mlp", optimizer="adagrad", schedule="step", resume=True, takeover=True,
                                      uninterrupted="mlp_adagrad_step", resume_on_several="mlp_adagrad_step_resume",
                                      processes=(1, 2)),
    # The same runs resumed by each side from its own checkpoint before the last epoch: what the
    # handovers and takeovers on several processes are held to on Accelerate's side.
    "mlp_accumulate_clip_resume": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=2, clip=0.5,
                                       resume=True, uninterrupted="mlp_accumulate_clip"),
    "mlp_bf16_epoch_resume": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                                  graph_optimization=False, accumulation=2, resume=True,
                                  uninterrupted="mlp_bf16_plain_graph"),
    "mlp_group_lr_step_resume": dict(model="mlp", optimizer="sgd", schedule="step", no_decay="*.bias", group_lr=0.01,
                                     resume=True, uninterrupted="mlp_group_lr_step"),
    "mlp_group_lr_plateau_resume": dict(model="mlp", optimizer="sgd", schedule="reduce_lr_on_plateau",
                                        no_decay="*.bias", group_lr=0.2,
                                        schedule_options={"patience": 0, "factor": 0.5, "threshold": 0.5},
                                        resume=True, uninterrupted="mlp_group_lr_plateau"),
    "mlp_adagrad_step_resume": dict(model="mlp", optimizer="adagrad", schedule="step", resume=True,
                                    uninterrupted="mlp_adagrad_step"),
    # Windows that the loader's end cuts short (sync_with_dataloader); an infinity-norm clip.
    "mlp_accumulate_3_clip_inf": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=3, clip=0.3,
                                      clip_norm_type=math.inf),
    # 42 samples: the last batch is short, and on 2 processes even_batches completes it from the
    # epoch's start; split_batches; drop_last; batches
    # dispatched from process 0.
    "mlp_uneven": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear"),
    "mlp_split_batches": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", split_batches=True,
                              batch_size=12),  # a multiple of 1-4 processes
    "mlp_drop_last": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", drop_last=True),
    "mlp_dispatch": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", dispatch_batches=True),
    # Biases in a group without weight decay; a frozen embedding; gradients synchronised on every
    # micro-batch (sync_each_batch); the scheduler stepped once per call (step_scheduler_with_optimizer off).
    "mlp_no_decay_group": dict(model="mlp", optimizer="adamw", schedule="linear", no_decay="*.bias"),
    "lm_frozen_embedding": dict(model="lm", optimizer="adamw", schedule="cosine", freeze="embed.*"),
    "mlp_sync_each_batch": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=2,
                                sync_each_batch=True),
    "mlp_scheduler_apart": dict(model="mlp", optimizer="sgd", schedule="linear", step_scheduler_with_optimizer=False),
    # Adam with amsgrad, RMSprop centred with momentum, Adagrad with decay; transformers' polynomial
    # (power 2) and constant warmups, torch's StepLR; label smoothing.
    "mlp_adam_polynomial": dict(model="mlp", optimizer="adam", schedule="polynomial", label_smoothing=0.1),
    "mlp_rmsprop_constant": dict(model="mlp", optimizer="rmsprop", schedule="constant_with_warmup"),
    "mlp_adagrad_step": dict(model="mlp", optimizer="adagrad", schedule="step"),
    # A CNN with BatchNorm: its running statistics are buffers, broadcast from process 0 at each
    # forward (DDP's broadcast_buffers), and the evaluation uses them.
    "cnn_batchnorm": dict(model="cnn", data="images", optimizer="adamw", schedule="linear"),
    "lm_bf16_accumulate": dict(model="lm", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                               accumulation=2, clip=1.0),
    # fp16 (GPU only): GradScaler's first steps overflow at its initial scale 65536 and are skipped
    # (the schedule waits with them); clipping unscales first.
    "mlp_fp16": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="fp16", gpu_only=True),
    "lm_fp16_accumulate_clip": dict(model="lm", optimizer="adamw", schedule="linear", mixed_precision="fp16",
                                    accumulation=2, clip=1.0, gpu_only=True),
    # Handed over to Accelerate with the GradScaler's state (scaler.pt) after its first overflows.
    "mlp_fp16_handover": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="fp16",
                              resume=True, handover=True, uninterrupted="mlp_fp16", processes=(1,), gpu_only=True),
    # Taken over from Accelerate the same way: our load_state reads its scaler.pt (scale, growth tracker).
    "mlp_fp16_takeover": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="fp16",
                              resume=True, takeover=True, uninterrupted="mlp_fp16", processes=(1,), gpu_only=True),
    # DDP's options (DistributedDataParallelKwargs) on a model of 2.1 MiB, whose gradient buckets
    # decide the sums' rounding on 3 or more processes: the default (one bucket, then rebuilt in the
    # gradients' order, 1 MiB first), a bucket_cap_mb that also caps the first bucket,
    # find_unused_parameters (the model's order, never rebuilt); gradients sent as fp16. Without
    # the JIT's graph optimisation on both sides: Debian 13's torch 2.6 hangs compiling this model's
    # CPU fusion group at its third forward.
    "wide": dict(model="wide", data="mlp", optimizer="sgd", schedule="linear", graph_optimization=False),
    "wide_bucket_cap": dict(model="wide", data="mlp", optimizer="sgd", schedule="linear", ddp_bucket_cap_mb=2,
                            graph_optimization=False),
    "wide_find_unused": dict(model="wide", data="mlp", optimizer="sgd", schedule="linear",
                             ddp_find_unused_parameters=True, graph_optimization=False),
    "mlp_fp16_comm_hook": dict(model="mlp", optimizer="adamw", schedule="linear", ddp_comm_hook="fp16"),
    # DDP's static_graph: the first step's allreduce delayed to the end of backward, then buckets in
    # that backward's order (PyTorch's static_graph fails under no_sync, so without accumulation).
    "wide_static_graph": dict(model="wide", data="mlp", optimizer="sgd", schedule="linear", ddp_static_graph=True,
                              graph_optimization=False),
    "mlp_static_graph_find_unused": dict(model="mlp", optimizer="adamw", schedule="linear", ddp_static_graph=True,
                                         ddp_find_unused_parameters=True),
    # PyTorch's PowerSGD hook (Accelerate's comm_hook="power_sgd", comm_state_option): plain averaging
    # for start_powerSGD_iter steps, then rank-r factors with error feedback; at rank 2 with fresh
    # projections every step; the LM's on an fp16 copy (comm_wrapper). Models of one gradient bucket:
    # on Gloo, PyTorch's hook hangs once two buckets compress at once (its callbacks wait for their
    # allreduces on Gloo's two worker threads); tests/data/export_power_sgd_cases.py covers two.
    # The resumed run keeps PowerSGD's state (Accelerate's starts it afresh) and is held to
    # Accelerate's uninterrupted run.
    "mlp_power_sgd": dict(model="mlp", optimizer="adamw", schedule="linear", ddp_comm_hook="power_sgd",
                          ddp_comm_state={"start_powerSGD_iter": 2}),
    "mlp_power_sgd_resume": dict(model="mlp", optimizer="adamw", schedule="linear", ddp_comm_hook="power_sgd",
                                 ddp_comm_state={"start_powerSGD_iter": 2}, resume=True, uninterrupted="mlp_power_sgd"),
    "mlp_power_sgd_rank2_cold": dict(model="mlp", optimizer="sgd", schedule="linear", ddp_comm_hook="power_sgd",
                                     ddp_comm_state={"matrix_approximation_rank": 2, "start_powerSGD_iter": 3,
                                                     "warm_start": False, "random_seed": 5}),
    "lm_power_sgd_fp16_wrapper": dict(model="lm", optimizer="adamw", schedule="cosine", ddp_comm_hook="power_sgd",
                                      ddp_comm_wrapper="fp16", accumulation=2,
                                      ddp_comm_state={"matrix_approximation_rank": 4, "start_powerSGD_iter": 2}),
    # LocalSGD (each process steps alone, the parameters averaged every 3 steps and at the end);
    # clipping by value.
    "mlp_local_sgd": dict(model="mlp", optimizer="sgd", schedule="linear", local_sgd=3),
    "mlp_clip_value": dict(model="mlp", optimizer="adamw", schedule="linear", clip_value=0.05),
    # The rest of transformers' get_scheduler() names, with their own settings.
    "mlp_cosine_restarts": dict(model="mlp", optimizer="sgd", schedule="cosine_with_restarts",
                                schedule_options={"num_cycles": 3}),
    "mlp_inverse_sqrt": dict(model="mlp", optimizer="adamw", schedule="inverse_sqrt", schedule_options={"timescale": 3}),
    "mlp_cosine_min_lr": dict(model="mlp", optimizer="sgd", schedule="cosine_with_min_lr",
                              schedule_options={"min_lr": 1e-3, "num_cycles": 0.75}),
    "mlp_cosine_warmup_min_lr": dict(model="mlp", optimizer="adamw", schedule="cosine_warmup_with_min_lr",
                                     schedule_options={"min_lr_rate": 0.1, "warmup_lr_rate": 0.25}),
    "mlp_warmup_stable_decay": dict(model="mlp", optimizer="sgd", schedule="warmup_stable_decay",
                                    schedule_options={"num_decay_steps": 4, "warmup_type": "1-sqrt",
                                                      "min_lr_ratio": 0.1}),
    "mlp_warmup_stable_decay_short": dict(model="mlp", optimizer="adamw", schedule="warmup_stable_decay",
                                          schedule_options={"num_decay_steps": 3, "num_stable_steps": 1,
                                                            "warmup_type": "cosine", "decay_type": "1-sqrt"}),
    # PyTorch's ReduceLROnPlateau stepped with each step's loss: Accelerate passes the metric on
    # num_processes times per step, and not at all inside an accumulation window.
    "mlp_reduce_on_plateau": dict(model="mlp", optimizer="sgd", schedule="reduce_lr_on_plateau",
                                  schedule_options={"patience": 1, "factor": 0.5, "threshold": 0.01, "cooldown": 1}),
    # min_lr per group (PyTorch's list): each group stops at its own floor.
    "mlp_reduce_on_plateau_per_group": dict(model="mlp", optimizer="sgd", schedule="reduce_lr_on_plateau",
                                            no_decay="*.bias", schedule_options={"patience": 0, "factor": 0.5,
                                                                                 "threshold": 0.5,
                                                                                 "min_lr": [0.01, 0.02]}),
    "mlp_reduce_on_plateau_accumulate": dict(model="mlp", optimizer="adamw", schedule="reduce_lr_on_plateau",
                                             accumulation=2, schedule_options={"patience": 0, "factor": 0.7,
                                                                               "threshold": 0.05,
                                                                               "threshold_mode": "abs",
                                                                               "min_lr": 4e-3}),
    # PyTorch's OneCycleLR, cycling SGD's momentum and AdamW's beta1: on 2 or more processes
    # Accelerate steps it num_processes times per step, so it reaches total_steps early and stops.
    "mlp_one_cycle": dict(model="mlp", optimizer="sgd", schedule="one_cycle", schedule_options={"max_lr": 0.1}),
    # PyTorch's lists: a rate and momenta of each group's own (the biases' group without decay).
    "mlp_one_cycle_per_group": dict(model="mlp", optimizer="sgd", schedule="one_cycle", no_decay="*.bias",
                                    schedule_options={"max_lr": [0.1, 0.02], "base_momentum": [0.85, 0.8]}),
    "mlp_cyclic_per_group": dict(model="mlp", optimizer="adamw", schedule="cyclic", no_decay="*.bias",
                                 schedule_options={"base_lr": [1e-3, 1e-4], "max_lr": [0.02, 0.005],
                                                   "step_size_up": 2}),
    # OneCycleLR past its total_steps under accumulation: Accelerate's guard reads _step_count, which
    # GradientAccumulationPlugin's adjust_scheduler would raise at each micro-step, but that setting
    # never reaches GradientState (to_kwargs drops a default value), so it does not.
    "mlp_one_cycle_accumulate": dict(model="mlp", optimizer="sgd", schedule="one_cycle", accumulation=2,
                                     schedule_options={"max_lr": 0.1}),
    "lm_one_cycle_three_phase": dict(model="lm", optimizer="adamw", schedule="one_cycle", accumulation=2,
                                     schedule_options={"max_lr": 0.02, "three_phase": True, "pct_start": 0.25}),
    # PyTorch's chainable schedulers, each rate computed from the one before.
    "mlp_cosine_annealing": dict(model="mlp", optimizer="adamw", schedule="cosine_annealing",
                                 schedule_options={"T_max": 3, "eta_min": 1e-3}),
    "mlp_multistep": dict(model="mlp", optimizer="sgd", schedule="multistep",
                          schedule_options={"milestones": [2, 4, 4], "gamma": 0.5}),
    "mlp_exponential": dict(model="mlp", optimizer="rmsprop", schedule="exponential", schedule_options={"gamma": 0.8}),
    "mlp_constant_lr": dict(model="mlp", optimizer="sgd", schedule="constant_lr",
                            schedule_options={"factor": 0.3, "total_iters": 3}),
    "mlp_linear_lr": dict(model="mlp", optimizer="adamw", schedule="linear_lr",
                          schedule_options={"start_factor": 0.2, "end_factor": 0.9, "total_iters": 4}),
    "mlp_polynomial_lr": dict(model="mlp", optimizer="rmsprop", schedule="polynomial_lr",
                              schedule_options={"total_iters": 5, "power": 1.5}),
    "mlp_cosine_warm_restarts": dict(model="mlp", optimizer="adamw", schedule="cosine_annealing_warm_restarts",
                                     schedule_options={"T_0": 2, "T_mult": 2, "eta_min": 1e-3}),
    # PyTorch's RAdam (rectified from its 6th step, decoupled weight decay) and NAdam, which
    # libtorch lacks.
    "mlp_radam": dict(model="mlp", optimizer="radam", schedule="linear"),
    "lm_nadam_accumulate": dict(model="lm", optimizer="nadam", schedule="cosine", accumulation=2),
    # PyTorch's Adamax, Adadelta, Rprop and ASGD, which libtorch lacks too; ASGD's step size follows
    # the scheduled rate, and its averaging starts at step 2.
    "mlp_adamax": dict(model="mlp", optimizer="adamax", schedule="linear"),
    "lm_adadelta_accumulate": dict(model="lm", optimizer="adadelta", schedule="cosine", accumulation=2),
    "mlp_rprop": dict(model="mlp", optimizer="rprop", schedule="exponential", schedule_options={"gamma": 0.9}),
    "mlp_asgd": dict(model="mlp", optimizer="asgd", schedule="linear"),
    # PyTorch's SWALR annealing ASGD's rate, as stochastic weight averaging does.
    "mlp_asgd_swalr": dict(model="mlp", optimizer="asgd", schedule="swa_lr",
                           schedule_options={"swa_lr": 0.01, "anneal_epochs": 4}),
    # PyTorch's AveragedModel, updated after each optimizer step and registered for checkpointing:
    # SWA over SGD annealed by SWALR; EMA across accumulation windows, across a resume, and of
    # BatchNorm's buffers (use_buffers, num_batches_tracked an integer). The evaluation runs the
    # averaged weights too (ours swapped into the model, Accelerate's AveragedModel itself).
    "mlp_swa": dict(model="mlp", optimizer="sgd", schedule="swa_lr", schedule_options={"swa_lr": 0.01, "anneal_epochs": 3},
                    averaged={}),
    "mlp_ema": dict(model="mlp", optimizer="adamw", schedule="linear", averaged={"strategy": "ema", "decay": 0.9}),
    "mlp_ema_resume": dict(model="mlp", optimizer="adamw", schedule="linear", averaged={"strategy": "ema", "decay": 0.9},
                           resume=True, uninterrupted="mlp_ema"),
    "lm_ema_accumulate": dict(model="lm", optimizer="adamw", schedule="cosine", accumulation=2,
                              averaged={"strategy": "ema", "decay": 0.8}),
    # EMA under bf16: the averages evaluated without autocast (Python's AveragedModel is not prepared).
    "cnn_ema_bf16": dict(model="cnn", data="images", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                         averaged={"strategy": "ema", "decay": 0.9}),
    "cnn_ema_buffers": dict(model="cnn", data="images", optimizer="adamw", schedule="linear",
                            averaged={"strategy": "ema", "decay": 0.75, "use_buffers": True}),
    # PyTorch's fused=True kernels (from 2.4), which round otherwise than its other rules.
    "lm_adamw_fused_accumulate_clip": dict(model="lm", optimizer="adamw_fused", schedule="linear", accumulation=2,
                                           clip=0.5),
    "mlp_sgd_fused_bf16": dict(model="mlp", optimizer="sgd_fused", schedule="cosine", mixed_precision="bf16"),
    # PyTorch 2.x's foreach rules (its default on CUDA), which round otherwise than the one-tensor ones.
    "mlp_radam_foreach": dict(model="mlp", optimizer="radam_foreach", schedule="linear"),
    "lm_nadam_foreach_accumulate": dict(model="lm", optimizer="nadam_foreach", schedule="cosine", accumulation=2),
    "mlp_asgd_foreach": dict(model="mlp", optimizer="asgd_foreach", schedule="linear"),
    # PyTorch's maximize: the loss ascends (the gradients stay the backward's for the clipping).
    "mlp_adam_maximize_clip": dict(model="mlp", optimizer="adam_maximize", schedule="linear", clip=0.5),
    # PyTorch's SequentialLR: a warm-up, then a cosine from the base rate (its closed form's first
    # rate, with eta_min), then a step decay.
    "mlp_sequential": dict(model="mlp", optimizer="adamw", schedule="linear_lr",
                           schedule_options={"start_factor": 0.1, "total_iters": 3},
                           then=[(3, "cosine_annealing", {"T_max": 4, "eta_min": 1e-3}),
                                 (6, "step", {"step_size": 2, "gamma": 0.5})]),
    # SequentialLR and ChainedScheduler with OneCycleLR and CyclicLR: a one-cycle then a constant
    # rate (resumed inside the cycle too); a warm-up then a cyclic moving AdamW's beta1; an
    # exponential decay chained with a one-cycle (which sets the rate the decay then moves).
    "mlp_one_cycle_then_constant": dict(model="mlp", optimizer="sgd", schedule="one_cycle",
                                        schedule_options={"max_lr": 0.1, "total_steps": 8},
                                        then=[(8, "constant_lr", {"factor": 0.5, "total_iters": 4})]),
    "mlp_one_cycle_then_constant_resume": dict(model="mlp", optimizer="sgd", schedule="one_cycle",
                                               schedule_options={"max_lr": 0.1, "total_steps": 8},
                                               then=[(8, "constant_lr", {"factor": 0.5, "total_iters": 4})],
                                               resume=True, uninterrupted="mlp_one_cycle_then_constant"),
    "mlp_warmup_then_cyclic": dict(model="mlp", optimizer="adamw", schedule="linear_lr",
                                   schedule_options={"start_factor": 0.25, "total_iters": 3},
                                   then=[(3, "cyclic", {"base_lr": 1e-3, "max_lr": 1e-2, "step_size_up": 2})]),
    "mlp_exponential_with_one_cycle": dict(model="mlp", optimizer="sgd", schedule="exponential",
                                           schedule_options={"gamma": 0.95},
                                           chain=[("one_cycle", {"max_lr": 0.1, "total_steps": 40})]),
    # A chain leading a sequence (PyTorch 2's SequentialLR over a ChainedScheduler), into a one-cycle.
    "mlp_chain_then_one_cycle": dict(model="mlp", optimizer="sgd", schedule="linear_lr",
                                     schedule_options={"start_factor": 0.25, "total_iters": 4},
                                     chain=[("exponential", {"gamma": 0.9})],
                                     then=[(6, "one_cycle", {"max_lr": 0.1, "total_steps": 20})]),
    # PyTorch's ChainedScheduler: each schedule moves the rate the one before left (ConstantLR's
    # factor undone at total_iters under the exponential decay; a cosine over a warm-up), and
    # MultiplicativeLR's factor of the rate before (alone, and leading a chain).
    "mlp_chained": dict(model="mlp", optimizer="sgd", schedule="constant_lr",
                        schedule_options={"factor": 0.5, "total_iters": 3}, chain=[("exponential", {"gamma": 0.9})]),
    "lm_chained_accumulate": dict(model="lm", optimizer="adamw", schedule="linear_lr", accumulation=2,
                                  schedule_options={"start_factor": 0.25, "total_iters": 3},
                                  chain=[("cosine_annealing", {"T_max": 5, "eta_min": 1e-4})]),
    "mlp_multiplicative": dict(model="mlp", optimizer="adamw", schedule="multiplicative",
                               schedule_options={"factors": [0.9, 0.95, 0.8]}),
    "mlp_multiplicative_chained": dict(model="mlp", optimizer="sgd", schedule="multiplicative",
                                       schedule_options={"factors": [0.9, 0.8]},
                                       chain=[("linear_lr", {"start_factor": 0.5, "total_iters": 4})]),
    "mlp_multiplicative_chained_resume": dict(model="mlp", optimizer="sgd", schedule="multiplicative",
                                              schedule_options={"factors": [0.9, 0.8]}, resume=True,
                                              chain=[("linear_lr", {"start_factor": 0.5, "total_iters": 4})],
                                              uninterrupted="mlp_multiplicative_chained"),
    # PyTorch's LambdaLR and MultiplicativeLR given one function per group (group g's factor at step s
    # is group_factors[g][s % len]), and CyclicLR with a scale_fn (scale[x % len]).
    "mlp_lambda_per_group": dict(model="mlp", optimizer="adamw", schedule="lambda", no_decay="*.bias",
                                 group_factors=[[1.0, 0.9, 0.8], [0.5, 1.0]]),
    "mlp_multiplicative_per_group_chained": dict(model="mlp", optimizer="sgd", schedule="multiplicative",
                                                 no_decay="*.bias", group_factors=[[0.9, 0.95], [0.8]],
                                                 chain=[("exponential", {"gamma": 0.95})]),
    "mlp_cyclic_scale_fn": dict(model="mlp", optimizer="sgd", schedule="cyclic", scale=[1.0, 0.9, 0.7],
                                schedule_options={"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2,
                                                  "scale_mode": "iterations"}),
    "mlp_cyclic_scale_fn_resume": dict(model="mlp", optimizer="sgd", schedule="cyclic", scale=[0.5, 1.0],
                                       schedule_options={"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3},
                                       resume=True, uninterrupted="mlp_cyclic_scale_fn_cycles"),
    "mlp_cyclic_scale_fn_cycles": dict(model="mlp", optimizer="sgd", schedule="cyclic", scale=[0.5, 1.0],
                                       schedule_options={"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3}),
    # PyTorch's CyclicLR, cycling SGD's momentum and AdamW's beta1 against the rate.
    "mlp_cyclic_triangular2": dict(model="mlp", optimizer="sgd", schedule="cyclic",
                                   schedule_options={"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 2,
                                                     "step_size_down": 3, "mode": "triangular2"}),
    "lm_cyclic_exp_range": dict(model="lm", optimizer="adamw", schedule="cyclic", accumulation=2,
                                schedule_options={"base_lr": 1e-3, "max_lr": 0.02, "step_size_up": 2,
                                                  "mode": "exp_range", "gamma": 0.9}),
    # Evaluation loaders whose sample count leaves odd remainders over the processes
    # (gather_for_metrics drops what even_batches repeated).
    "mlp_eval_1": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_samples=1),
    "mlp_eval_5": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_samples=5),
    "mlp_eval_17": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_samples=17),
    "mlp_eval_5_split": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_samples=5,
                             split_batches=True, batch_size=12),
    "mlp_eval_5_dispatch": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_samples=5,
                                dispatch_batches=True),
    # skip_first_batches without a resume: in the second epoch (seedable and unseeded), in the first
    # with accumulation windows, most of an uneven epoch.
    "mlp_seedable_skip_epoch1": dict(model="mlp", optimizer="sgd", schedule="cosine", data_seed=11, epochs=3,
                                     skip={1: 2}),
    "mlp_skip_unseeded": dict(model="mlp", optimizer="adamw", schedule="linear", epochs=3, skip={1: 1}),
    "mlp_skip_accumulate": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=3, skip={0: 1}),
    "mlp_uneven_skip": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", skip={1: 5}),
    # Accumulation windows that run across the epoch's end (sync_with_dataloader=False).
    "mlp_accumulate_3_no_loader_sync": dict(model="mlp", optimizer="adamw", schedule="linear", accumulation=3,
                                            sync_with_dataloader=False, epochs=3, clip=0.5),
    "lm_accumulate_4_no_loader_sync": dict(model="lm", optimizer="sgd", schedule="cosine", accumulation=4,
                                           sync_with_dataloader=False),
    # A second parameter group with its own learning rate, under schedules (its rate recorded too).
    "mlp_group_lr_linear": dict(model="mlp", optimizer="adamw", schedule="linear", no_decay="*.bias", group_lr=0.003),
    "mlp_group_lr_cosine_annealing": dict(model="mlp", optimizer="sgd", schedule="cosine_annealing",
                                          no_decay="*.bias", group_lr=0.2, schedule_options={"T_max": 4, "eta_min": 1e-3}),
    "mlp_group_lr_step": dict(model="mlp", optimizer="sgd", schedule="step", no_decay="*.bias", group_lr=0.01),
    "mlp_group_lr_one_cycle": dict(model="mlp", optimizer="adamw", schedule="one_cycle", no_decay="*.bias",
                                   group_lr=0.001, accumulation=2, schedule_options={"max_lr": 0.05}),
    "mlp_group_lr_plateau": dict(model="mlp", optimizer="sgd", schedule="reduce_lr_on_plateau", no_decay="*.bias",
                                 group_lr=0.2, schedule_options={"patience": 0, "factor": 0.5, "threshold": 0.5}),
    # Collectives on odd inputs (no training): gather of 0-d, empty, int and bf16 tensors,
    # pad_across_processes on each dim (negative too, pad_first), reduce sum/mean.
    "ops": dict(model="mlp", optimizer="sgd", schedule="linear", ops=True),
    # even_batches=False (training data even over 2 processes): the evaluation's last batches differ in
    # size, padded with pad_across_processes before gather_for_metrics.
    # On 3 or 4 processes its uneven training batches leave one process out of a DDP allreduce.
    "mlp_no_even_batches_eval": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, even_batches=False,
                                     eval_samples=14, eval_pad=True, processes=(1, 2)),
    # More skip_first_batches: split batches, drop_last.
    "mlp_split_skip": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", split_batches=True,
                           batch_size=12, skip={0: 1}),
    "mlp_drop_last_skip": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", drop_last=True,
                               skip={1: 3}),
    # The scheduler stepped at every call (step_scheduler_with_optimizer off) inside accumulation windows.
    "mlp_scheduler_apart_accumulate": dict(model="mlp", optimizer="sgd", schedule="linear", accumulation=2,
                                           step_scheduler_with_optimizer=False),
    # Accelerate's skip_first_batches on a DataLoaderDispatcher counts the base loader's batches
    # (num_processes of them per step): it is given num_processes times our skip (README).
    "mlp_dispatch_skip": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear",
                              dispatch_batches=True, skip={1: 2}),
    # With split_batches a dispatched base batch is a whole step: Accelerate's skip counts steps.
    "mlp_dispatch_split_skip": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear",
                                    dispatch_batches=True, split_batches=True, batch_size=8, skip={0: 2}),
    # Over a map-style dataset Accelerate's skip goes through the batch sampler: the skipped batches
    # are never read (no augmentation drawn for them), and the last batch is padded with the first
    # one read after the skip. Workers under dispatch: every process makes the base iterator, whose
    # sampler draws its seed from torch's generator as the workers are given their first batches.
    "mlp_dispatch_skip_padded": dict(model="mlp", data="mlp_42", samples=41, optimizer="sgd", schedule="linear",
                                     dispatch_batches=True, skip={1: 1}),
    "mlp_dispatch_split_skip_augment": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear",
                                            dispatch_batches=True, split_batches=True, batch_size=8, augment=True,
                                            skip={1: 1}),
    "mlp_dispatch_workers_augment": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear",
                                         dispatch_batches=True, augment=True, num_workers=2),
    # Two models, optimizers and schedulers prepared together, one loss over both (a second MLP
    # under SGD with StepLR): with accumulation and clipping each model.
    "two_models": dict(model="mlp", optimizer="adamw", schedule="linear", second=True),
    "two_models_accumulate_clip": dict(model="mlp", optimizer="adamw", schedule="linear", second=True,
                                       accumulation=2, clip=0.5),
    # Streams (an IterableDataset; acc_dataset_from_iterator).
    # dispatch_batches default (True for streams), the 42-sample data, a stream evaluation (10 samples).
    "stream": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True, eval_stream=True),
    # The stream's epoch start shuffles with the epoch number (set_epoch / start callback).
    "stream_shuffled": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="cosine", stream=True,
                            stream_shuffle=7, epochs=3),
    "stream_batch8": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True, batch_size=8),
    "stream_41_dispatch": dict(model="mlp", data="mlp_42", samples=41, optimizer="adamw", schedule="linear",
                               stream=True, eval_stream=True, eval_samples=5),
    "stream_dispatch_split": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                  split_batches=True, batch_size=12, eval_stream=True, eval_samples=17),
    "stream_dispatch_drop_last": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", stream=True,
                                      drop_last=True, batch_size=8),
    # dispatch_batches=False: IterableDatasetShard.
    "stream_shard": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                         dispatch_batches=False),
    "stream_shard_batch8": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                dispatch_batches=False, batch_size=8, stream_shuffle=3),
    "stream_shard_split": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                               dispatch_batches=False, split_batches=True, batch_size=12),
    "stream_shard_drop_last": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", stream=True,
                                   dispatch_batches=False, drop_last=True, batch_size=8),
    "stream_shard_no_even": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", stream=True,
                                 dispatch_batches=False, even_batches=False, batch_size=8,
                                 eval_pad=True,  # the map-style evaluation is uneven without even_batches
                                 processes=(1, 2)),  # 10 evaluation samples in batches of 8: 2 batches
    # Evaluations over streams whose last round is short (training on the map-style data). Sharded
    # (dispatch_batches off), Accelerate's gather_for_metrics keeps the padding of that round (its
    # remainder counts the per-process batch: README, Data): ours is held to the real samples, the
    # start of Accelerate's.
    "stream_eval_dispatch_5": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                   eval_samples=5),
    "stream_eval_dispatch_17": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                    eval_samples=17),
    "stream_eval_shard_10": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                 eval_samples=10, dispatch_batches=False,
                                 accelerate_keeps_padding=True),
    "stream_eval_shard_10_len": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                     eval_samples=10, dispatch_batches=False, stream_len=True,
                                     accelerate_keeps_padding=True),
    "stream_eval_dispatch_5_len": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                       eval_samples=5, stream_len=True),
    # Accumulation windows the stream's end cuts short.
    "stream_accumulate_3": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                accumulation=3, clip=0.5),
    "stream_shard_accumulate_4": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                      dispatch_batches=False, accumulation=4, batch_size=3),
    # Resumes (ours restores the stream position; Accelerate's by skip_first_batches).
    "stream_resume": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                          stream_shuffle=5, resume=True, uninterrupted="stream_shuffled_adamw"),
    "stream_shuffled_adamw": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                  stream_shuffle=5),
    "stream_resume_mid_epoch": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                    stream_shuffle=5, resume=True, resume_at=2, uninterrupted="stream_shuffled_adamw"),
    "stream_shard_resume_mid_epoch": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear",
                                          stream=True, dispatch_batches=False, stream_shuffle=5, resume=True,
                                          resume_at=2, uninterrupted="stream_shard_shuffled_adamw"),
    "stream_shard_shuffled_adamw": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                        dispatch_batches=False, stream_shuffle=5),
    # skip_first_batches on a stream (no resume).
    "stream_skip": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", stream=True, skip={1: 2}),
    "stream_shard_skip": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", stream=True,
                              dispatch_batches=False, skip={0: 1, 1: 3}),
    "stream_accumulate_3_no_loader_sync": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear",
                                               stream=True, accumulation=3, sync_with_dataloader=False, epochs=3),
    "stream_eval_shard_1": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                eval_samples=1, dispatch_batches=False,
                                accelerate_keeps_padding=True),
    "stream_eval_dispatch_3": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                   eval_samples=3),
    "stream_eval_shard_split_17": dict(model="mlp", optimizer="sgd", schedule="linear", epochs=1, eval_stream=True,
                                       eval_samples=17, dispatch_batches=False, split_batches=True, batch_size=12,
                                       accelerate_keeps_padding=True),
    "stream_skip_past_end": dict(model="mlp", data="mlp_42", optimizer="sgd", schedule="linear", stream=True,
                                 epochs=3, skip={1: 50}),
    # A custom batch sampler (a list of batches of varying sizes; with even_batches the last round is
    # completed with whole batches from the epoch's start).
    "batch_sampler": dict(model="mlp", optimizer="adamw", schedule="linear", even_batches=False, eval_pad=True,
                          eval_samples=14,  # as many evaluation batches on each of 2 processes
                          batch_sampler=[[0, 1, 2], [3, 4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15, 16, 17],
                                         [18, 19], [20, 21, 22, 23], [24, 25, 26, 27, 28, 29, 30, 31],
                                         [32, 33, 34, 35, 36, 37, 38, 39]],
                          processes=(1, 2, 4)),  # 8 batches: on 3, one process trains a step fewer
    "batch_sampler_even": dict(model="mlp", optimizer="adamw", schedule="linear",
                               batch_sampler=[[0, 1, 2], [3, 4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15, 16, 17],
                                              [18, 19], [20, 21, 22, 23], [24, 25, 26, 27, 28, 29, 30]]),
    # Augmentation drawn in the dataset (each sample's features plus torch.rand noise), loaded by 2
    # workers (PyTorch's processes seeded base_seed + id, our threads likewise); a loader with a
    # generator of its own (DataLoader(generator=...)), with and without workers; resumed after the
    # first epoch (in the middle of one, Accelerate's skip_first_batches loader restarts its workers'
    # round robin and seeds, where ours goes on exactly).
    "mlp_augment_workers": dict(model="mlp", optimizer="adamw", schedule="linear", augment=True, num_workers=2),
    # Without workers the augmentation draws from the global generator, between dropout's draws: each
    # batch is fetched before the step on the batch before it (the prepared loader's look-ahead).
    "mlp_augment": dict(model="mlp", optimizer="adamw", schedule="linear", augment=True),
    # A stream that adds such noise as it is read: one batch ahead of the step on one process (the
    # prepared loader), one global batch ahead with dispatch_batches (process 0's loader reads the
    # stream only when the dispatcher asks), and sharded.
    "stream_augment": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True, augment=True),
    "stream_shard_augment": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", stream=True,
                                 augment=True, dispatch_batches=False),
    # Resumed in the middle of an epoch: the skipped batches are read again (drawing again), the first
    # and the one read ahead under the states they were first read under.
    "stream_augment_resume_mid_epoch": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear",
                                            stream=True, augment=True, resume=True, resume_at=2,
                                            uninterrupted="stream_augment"),
    "stream_shard_augment_resume_mid_epoch": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear",
                                                  stream=True, augment=True, dispatch_batches=False, resume=True,
                                                  resume_at=2, uninterrupted="stream_shard_augment"),
    # Every epoch left one batch before its end (a loop with a step budget): the synchronized
    # shuffle's generator has taken its last draw or not as Accelerate's, so the next epoch's order
    # is the same; with a generator of the loader's own, and with workers asking ahead.
    "mlp_left_early": dict(model="mlp", data="mlp_42", optimizer="adamw", schedule="linear", epochs=3,
                           leave_before_end=1),
    "mlp_left_early_workers": dict(model="mlp", optimizer="adamw", schedule="linear", epochs=3, leave_before_end=1,
                                   num_workers=2, loader_generator=7),
    "mlp_augment_resume": dict(model="mlp", optimizer="adamw", schedule="linear", augment=True, resume=True,
                               uninterrupted="mlp_augment"),
    "mlp_loader_generator": dict(model="mlp", optimizer="sgd", schedule="cosine", loader_generator=7),
    "mlp_loader_generator_workers": dict(model="mlp", optimizer="adamw", schedule="linear", augment=True,
                                         num_workers=2, loader_generator=7),
    "mlp_augment_workers_resume": dict(model="mlp", optimizer="adamw", schedule="linear", augment=True,
                                       num_workers=2, loader_generator=7, resume=True,
                                       uninterrupted="mlp_loader_generator_workers"),
    "batch_sampler_skip": dict(model="mlp", optimizer="adamw", schedule="linear", even_batches=False, skip={1: 1},
                               eval_pad=True, eval_samples=14,
                               batch_sampler=[[0, 1, 2], [3, 4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15, 16, 17],
                                              [18, 19], [20, 21, 22, 23], [24, 25, 26, 27, 28, 29, 30, 31],
                                              [32, 33, 34, 35, 36, 37, 38, 39]],
                               processes=(1, 2, 4)),
}
# Handed over and taken over under schedules whose Python state holds more than a step count and
# rates (a one-cycle's phases and the keys it writes into the groups, a cyclic schedule's settings,
# a warm-restart cycle's position, a sequence's and a chain's parts), with the resumes they are held
# to on several processes.
# Also sequences and chains holding such schedules, PyTorch's foreach rules (a group must say it
# takes them), and a seedable sampler (whose epoch the loop taking over sets).
SCENARIOS["mlp_warmup_then_warm_restarts"] = dict(
    model="mlp", optimizer="adamw", schedule="linear_lr", schedule_options={"start_factor": 0.25, "total_iters": 3},
    then=[(3, "cosine_annealing_warm_restarts", {"T_0": 3, "T_mult": 2, "eta_min": 1e-3})])
for _base in ("mlp_one_cycle", "mlp_cyclic_triangular2", "mlp_cosine_warm_restarts", "mlp_sequential", "mlp_chained",
              "mlp_one_cycle_then_constant", "mlp_warmup_then_cyclic", "mlp_exponential_with_one_cycle",
              "mlp_chain_then_one_cycle", "mlp_warmup_then_warm_restarts", "mlp_radam_foreach", "mlp_asgd_foreach",
              "lm_nadam_foreach_accumulate", "mlp_seedable_sampler"):
    SCENARIOS.setdefault(_base + "_resume", dict(SCENARIOS[_base], resume=True, uninterrupted=_base))
    for _way in ("handover", "takeover"):
        SCENARIOS[f"{_base}_{_way}"] = dict(SCENARIOS[_base], resume=True, uninterrupted=_base, processes=(1, 2),
                                            resume_on_several=_base + "_resume", **{_way: True})
# LoRA fine-tuning: Accelerate trains the eager model with PEFT's layers (LoraLinear), ours adds
# adapters to the TorchScript model (acc_model_add_lora); each saves the merged model. Without the
# JIT's graph optimisation on ours, as eager PyTorch computes.
_LORA = dict(targets="fc1,fc2", r=4, alpha=8)
SCENARIOS.update({
    "mlp_lora": dict(model="mlp", optimizer="adamw", schedule="linear", lora=_LORA, graph_optimization=False),
    "mlp_lora_resume": dict(model="mlp", optimizer="adamw", schedule="linear", lora=_LORA, graph_optimization=False,
                            resume=True, uninterrupted="mlp_lora"),
    "mlp_lora_dropout": dict(model="mlp", optimizer="adamw", schedule="cosine", lora=dict(_LORA, dropout=0.1),
                             accumulation=2, clip=0.5, graph_optimization=False),
    "mlp_lora_bf16": dict(model="mlp", optimizer="adamw", schedule="linear", lora=dict(_LORA, dropout=0.1),
                          mixed_precision="bf16", graph_optimization=False),
    "lm_lora": dict(model="lm", optimizer="adamw", schedule="linear", lora=dict(targets="linear1,linear2,head", r=4,
                    alpha=8, dropout=0.1), accumulation=2, graph_optimization=False),
    "mlp_lora_head": dict(model="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                          lora=dict(targets="fc1", r=4, alpha=8, modules_to_save="fc2")),
    "mlp_lora_head_clip": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                               lora=dict(targets="fc1", r=4, alpha=8, modules_to_save="fc2")),
    "mlp_lora_head_resume": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                                 lora=dict(targets="fc1", r=4, alpha=8, modules_to_save="fc2"), resume=True,
                                 uninterrupted="mlp_lora_head_clip"),
    # PEFT's LoRA on the embedding beside the linear layers; with its adapters drawn whole (init
    # false), reference outputs, and under ZeRO-3.
    "lm_lora_embedding": dict(model="lm", optimizer="adamw", schedule="linear", accumulation=2, clip=0.5,
                              graph_optimization=False, lora=dict(targets="embed,linear1,linear2,head", r=4, alpha=8,
                                                                  dropout=0.1)),
    "lm_lora_embedding_drawn": dict(model="lm", optimizer="adamw", schedule="cosine", graph_optimization=False,
                                    reference_forward=True,
                                    lora=dict(targets="embed", r=4, alpha=8, init="false")),
    "lm_lora_embedding_dora": dict(model="lm", optimizer="adamw", schedule="linear", accumulation=2,
                                   graph_optimization=False, reference_forward=True,
                                   lora=dict(targets="embed,linear2", r=4, alpha=8, dropout=0.1, use_dora=True)),
    # PEFT's MiCA: B from the minor singular vectors and frozen, A alone trains (with weight decay).
    "mlp_mica": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                     lora=dict(targets="fc1,fc2", r=2, alpha=4, dropout=0.1, init="mica")),
    "lm_lora_embedding_mica": dict(model="lm", optimizer="adamw", schedule="linear", accumulation=2,
                                   graph_optimization=False,
                                   lora=dict(targets="embed,linear1,head", r=4, alpha=8, init="mica")),
    "lm_lora_embedding_zero3": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                                    zero_stage=3, processes=(2,),
                                    lora=dict(targets="embed,linear1,linear2,head", r=4, alpha=8, dropout=0.1)),
    "lm_lora_block_saved": dict(model="lm", optimizer="adamw", schedule="linear", clip=0.5, graph_optimization=False,
                                lora=dict(targets="linear1,head", r=4, alpha=8, modules_to_save="block")),
    "mlp_lora_bias_all": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                              lora=dict(targets="fc1", r=4, alpha=8, bias="all")),
    "lm_lora_bias_lora_only": dict(model="lm", optimizer="adamw", schedule="linear", clip=0.5, accumulation=2,
                                   graph_optimization=False,
                                   lora=dict(targets="linear1,linear2", r=4, alpha=8, dropout=0.1, bias="lora_only")),
    "wide_lora_patterns": dict(model="wide", data="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                               lora=dict(targets="fc1,fc2,fc3", r=4, alpha=8, rank_pattern={"fc2": 8, "fc[13]": 2},
                                         alpha_pattern={"fc3": 32, "fc.": 4})),
    "lm_lora_patterns": dict(model="lm", optimizer="adamw", schedule="linear", accumulation=2, graph_optimization=False,
                             lora=dict(targets="linear1,linear2,head", r=4, alpha=8, dropout=0.1,
                                       rank_pattern={"block\\.linear2": 6, "head": 2}, alpha_pattern={"linear.": 3})),
    "mlp_dora": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                     lora=dict(_LORA, use_dora=True)),
    "mlp_dora_resume": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                            lora=dict(_LORA, use_dora=True), resume=True, uninterrupted="mlp_dora"),
    "mlp_dora_dropout": dict(model="mlp", optimizer="adamw", schedule="cosine", accumulation=2, clip=0.5,
                             graph_optimization=False, lora=dict(_LORA, dropout=0.1, use_dora=True)),
    "mlp_dora_bf16": dict(model="mlp", optimizer="adamw", schedule="linear", mixed_precision="bf16",
                          graph_optimization=False, lora=dict(_LORA, dropout=0.1, use_dora=True)),
    "lm_dora": dict(model="lm", optimizer="adamw", schedule="linear", accumulation=2, graph_optimization=False,
                    lora=dict(targets="linear1,linear2,head", r=4, alpha=8, dropout=0.1, use_dora=True)),
    # PEFT's disable_adapter() before every step (TRL's reference outputs), with dropout: the
    # reference outputs are the base model's, and the disabled forward draws nothing.
    "mlp_lora_reference": dict(model="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                               lora=dict(_LORA, dropout=0.1), reference_forward=True),
    "lm_dora_reference": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                              accumulation=2, reference_forward=True,
                              lora=dict(targets="linear1,linear2,head", r=4, alpha=8, dropout=0.1, use_dora=True)),
    # PEFT's OLoRA and PiSSA (with PyTorch's own torch.svd_lowrank for pissa_niter_<n>).
    # PEFT's trainable_token_indices beside LoRA: the embedding's rows 1, 3 and 5 train, through the
    # block's dropout; with reference outputs (the rows left out), and under our ZeRO-2 and ZeRO-3 (the
    # replaced weight made as the embedding's unit is gathered).
    "lm_lora_tokens": dict(model="lm", optimizer="adamw", schedule="linear", clip=0.5, graph_optimization=False,
                           lora=dict(targets="linear1,linear2", r=4, alpha=8, dropout=0.1,
                                     trainable_token_indices=[1, 3, 5])),
    "lm_lora_tokens_reference": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                                     reference_forward=True, accumulation=2,
                                     lora=dict(targets="linear1,head", r=4, alpha=8, dropout=0.1,
                                               trainable_token_indices={"embed": [5, 2]})),
    "lm_lora_tokens_zero3": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                                 zero_stage=3, processes=(2,), reference_forward=True,
                                 lora=dict(targets="linear1,linear2", r=4, alpha=8,
                                           trainable_token_indices=[1, 3, 5])),
    "lm_lora_tokens_zero2": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                                 zero_stage=2, processes=(2,),
                                 lora=dict(targets="linear1,linear2", r=4, alpha=8, dropout=0.1,
                                           trainable_token_indices=[1, 3, 5])),
    # PEFT's TrainableTokensConfig (trainable tokens alone, no LoRA) on the input embedding, its rows
    # starting as torch.randn draws (init_weights false), with reference outputs (the rows left out);
    # and under our ZeRO-3 (the replaced weight made as the embedding's unit is gathered).
    "lm_tokens_alone": dict(model="lm", optimizer="adamw", schedule="linear", clip=0.5, graph_optimization=False,
                            reference_forward=True, accumulation=2,
                            lora=dict(method="TRAINABLE_TOKENS", token_indices=[1, 3, 5], init_weights=False)),
    "lm_tokens_alone_zero3": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                                  zero_stage=3, processes=(2,), reference_forward=True,
                                  lora=dict(method="TRAINABLE_TOKENS", token_indices=[4, 1], init_weights=False)),
    # The disabled model computes the module to save as it was (PEFT's original_module).
    "mlp_lora_head_reference": dict(model="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                                    reference_forward=True, clip=0.05,
                                    lora=dict(targets="fc1", r=4, alpha=8, dropout=0.1, modules_to_save="fc2")),
    "cnn_lora_norm_reference": dict(model="cnn", data="images", optimizer="sgd", schedule="step",
                                    graph_optimization=False, reference_forward=True,
                                    lora=dict(targets="fc", r=2, alpha=4, modules_to_save="norm")),
    # PEFT's LoRA on a convolution beside its linear head, dropout, reference outputs; and under ZeRO-3.
    "cnn_lora_conv": dict(model="cnn", data="images", optimizer="adamw", schedule="linear", clip=0.5,
                          graph_optimization=False, reference_forward=True, accumulation=2,
                          lora=dict(targets="conv,fc", r=2, alpha=4, dropout=0.1)),
    # DoRA on the convolution and the head (1 x out x 1 x 1 magnitudes), and lora_bias on both.
    "cnn_lora_conv_dora": dict(model="cnn", data="images", optimizer="adamw", schedule="linear", clip=0.5,
                               graph_optimization=False, reference_forward=True, accumulation=2,
                               lora=dict(targets="conv,fc", r=2, alpha=4, dropout=0.1, use_dora=True)),
    "cnn_lora_conv_bias": dict(model="cnn", data="images", optimizer="adamw", schedule="cosine",
                               graph_optimization=False, lora=dict(targets="conv,fc", r=2, alpha=4, dropout=0.1,
                                                                   lora_bias=True)),
    "cnn_lora_conv_dora_zero3": dict(model="cnn", data="images", optimizer="adamw", schedule="linear",
                                     graph_optimization=False, zero_stage=3, processes=(2,),
                                     lora=dict(targets="conv,fc", r=2, alpha=4, dropout=0.1, use_dora=True)),
    "cnn_lora_conv_zero3": dict(model="cnn", data="images", optimizer="adamw", schedule="linear",
                                graph_optimization=False, zero_stage=3, processes=(2,),
                                lora=dict(targets="conv,fc", r=2, alpha=4, modules_to_save="norm")),
    # GPT-2's layers (transformers' Conv1D, weights in x out), which PEFT adapts with fan_in_fan_out:
    # LoRA on the attention's c_attn and both c_proj, DoRA, PiSSA (the weight decomposed transposed),
    # and under stage 3.
    "gpt2_lora": dict(model="gpt2", data="lm", optimizer="adamw", schedule="linear", accumulation=2, clip=0.5,
                      graph_optimization=False, lora=dict(targets="c_attn,c_proj", r=4, alpha=8, dropout=0.1)),
    "gpt2_dora": dict(model="gpt2", data="lm", optimizer="adamw", schedule="cosine", graph_optimization=False,
                      lora=dict(targets="c_attn,c_fc,head", r=4, alpha=8, dropout=0.1, use_dora=True)),
    "gpt2_pissa": dict(model="gpt2", data="lm", optimizer="adamw", schedule="linear", clip=0.5,
                       graph_optimization=False, lora=dict(targets="c_attn,c_fc", r=4, alpha=8, init="pissa")),
    "gpt2_lora_zero3": dict(model="gpt2", data="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                            processes=(2,), zero_stage=3,
                            lora=dict(targets="c_attn,c_proj", r=4, alpha=8, dropout=0.1, lora_bias=True)),
    "mlp_olora": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                      lora=dict(targets="fc1", r=4, alpha=8, init="olora")),
    "mlp_pissa": dict(model="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                      lora=dict(targets="fc1", r=4, alpha=8, dropout=0.1, init="pissa")),
    "lm_pissa_niter": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                           lora=dict(targets="linear1,linear2,head", r=4, alpha=8, init="pissa_niter_2")),
    "mlp_lora_bias": dict(model="mlp", optimizer="adamw", schedule="linear", clip=0.05, graph_optimization=False,
                          lora=dict(_LORA, dropout=0.1, lora_bias=True), accumulation=2),
    "lm_lora_bias": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                         lora=dict(targets="linear1,linear2,head", r=4, alpha=8, dropout=0.1, lora_bias=True)),
    "wide_dora_patterns": dict(model="wide", data="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                               lora=dict(targets="fc1,fc2,fc3", r=4, alpha=8, rank_pattern={"fc2": 8},
                                         alpha_pattern={"fc3": 32}, use_dora=True)),
    "cnn_lora_norm": dict(model="cnn", data="images", optimizer="sgd", schedule="step", graph_optimization=False,
                          lora=dict(targets="fc", r=2, alpha=4, modules_to_save="norm")),
    "cnn_lora": dict(model="cnn", data="images", optimizer="sgd", schedule="step", lora=dict(targets="fc", r=2, alpha=4),
                     graph_optimization=False),
})
# Our sharded data parallelism (zero_stage) against Accelerate's DDP, which the stages equal bit for
# bit where they reduce in DDP's order: stage 1 on any number of processes, stages 2 and 3 on 2
# (README, "Sharded data parallelism"). Stage 3 runs a TorchScript model unit by unit: without the
# JIT's graph optimisation, which would differentiate the whole graph otherwise.
SCENARIOS.update({
    "mlp_zero1": dict(model="mlp", optimizer="adamw", schedule="linear", zero_stage=1, accumulation=2, clip=0.5,
                      processes=(2, 3)),
    "mlp_zero2": dict(model="mlp", optimizer="adam", schedule="cosine", zero_stage=2, clip_value=0.2,
                      processes=(2,)),
    "mlp_zero2_resume": dict(model="mlp", optimizer="adam", schedule="cosine", zero_stage=2, clip_value=0.2,
                             resume=True, uninterrupted="mlp_zero2", processes=(2,)),
    "mlp_zero3": dict(model="mlp", optimizer="adamw", schedule="linear", zero_stage=3, accumulation=2,
                      graph_optimization=False, processes=(2,)),
    "mlp_zero3_sharded_resume": dict(model="mlp", optimizer="adamw", schedule="linear", zero_stage=3, accumulation=2,
                                     graph_optimization=False, resume=True, uninterrupted="mlp_zero3",
                                     state_dict_type="SHARDED_STATE_DICT", processes=(2,)),
    "lm_zero3_bf16": dict(model="lm", optimizer="adamw", schedule="linear", zero_stage=3, mixed_precision="bf16",
                          freeze="embed.*", graph_optimization=False, processes=(2,)),
    "cnn_zero3": dict(model="cnn", data="images", optimizer="sgd", schedule="step", zero_stage=3,
                      graph_optimization=False, processes=(2,)),
    "lm_lora_zero3": dict(model="lm", optimizer="adamw", schedule="linear", lora=dict(targets="linear1,linear2,head",
                          r=4, alpha=8, dropout=0.1), zero_stage=3, graph_optimization=False, processes=(2,)),
    "mlp_lora_head_zero3": dict(model="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                                lora=dict(targets="fc1", r=4, alpha=8, modules_to_save="fc2"), zero_stage=3,
                                processes=(2,)),
    "lm_lora_reference_zero3": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False,
                                    processes=(2,), zero_stage=3, reference_forward=True,
                                    lora=dict(targets="linear1,linear2,head", r=4, alpha=8, dropout=0.1)),
    "mlp_pissa_zero3": dict(model="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                            processes=(2,), zero_stage=3, lora=dict(targets="fc1", r=4, alpha=8, init="pissa")),
    "mlp_dora_zero3": dict(model="mlp", optimizer="adamw", schedule="linear", lora=dict(_LORA, dropout=0.1, use_dora=True),
                           zero_stage=3, graph_optimization=False, processes=(2,)),
    "lm_dora_zero3": dict(model="lm", optimizer="adamw", schedule="linear", graph_optimization=False, processes=(2,),
                          lora=dict(targets="linear1,linear2,head", r=4, alpha=8, dropout=0.1, use_dora=True),
                          zero_stage=3),
    "mlp_lora_bias_zero3": dict(model="mlp", optimizer="adamw", schedule="linear", graph_optimization=False,
                                lora=dict(_LORA, dropout=0.1, lora_bias=True), zero_stage=3, processes=(2,)),
    "mlp_lora_zero3": dict(model="mlp", optimizer="adamw", schedule="linear", lora=dict(_LORA, dropout=0.1),
                           zero_stage=3, graph_optimization=False, processes=(2,)),
    # PyTorch's fused kernels round a tensor's last elements otherwise than its vector body: the
    # slices keep each parameter's alignment (cpp/parallel/flat_layout.h).
    "mlp_sgd_fused_zero2": dict(model="mlp", optimizer="sgd_fused", schedule="step", data="mlp_42", epochs=3,
                                zero_stage=2, processes=(2,)),
    "lm_adamw_fused_zero3": dict(model="lm", optimizer="adamw_fused", schedule="linear", accumulation=2,
                                 zero_stage=3, graph_optimization=False, processes=(2,)),
    "mlp_adamw_fused_zero1": dict(model="mlp", optimizer="adamw_fused", schedule="cosine", zero_stage=1,
                                  processes=(2, 3)),
})
DEFAULTS = dict(mixed_precision="no", accumulation=1, clip=0.0, seed=42, epochs=2, batch_size=4, data_seed=None,
                loader_seed=False, resume=False, clip_norm_type=2.0, data=None, even_batches=True, split_batches=False,
                drop_last=False, dispatch_batches=None, no_decay=None, freeze=None, sync_each_batch=False,
                step_scheduler_with_optimizer=True, resume_at=None, label_smoothing=0.0, ddp_bucket_cap_mb=None,
                ddp_find_unused_parameters=False, ddp_static_graph=False, ddp_comm_hook=None, ddp_comm_wrapper=None, ddp_comm_state=None,
                local_sgd=None, clip_value=None,
                graph_optimization=True, schedule_options={}, then=(), chain=(), averaged=None, group_factors=None,
                scale=None, gpu_only=False, eval_samples=None, skip=None, sync_with_dataloader=True,
                group_lr=None, ops=False, second=False, eval_pad=False,
                stream=False, eval_stream=False, stream_shuffle=None, stream_len=False, samples=None,
                batch_sampler=None, augment=False, num_workers=0, loader_generator=None, leave_before_end=None,
                handover=False, takeover=False, zero_stage=0, state_dict_type=None, lora=None,
                reference_forward=False)
EVAL_SAMPLES = 10  # an evaluation loader whose last batch is uneven over 2 processes
VOCAB, CLASSES = 16, 3


def stream_order(n, shuffle, epoch):
    """The order a stream yields its samples in at `epoch`: in order, or permuted with seed shuffle + epoch
    (its own generator: the global one is untouched)."""
    if shuffle is None:
        return list(range(n))
    return torch.randperm(n, generator=torch.Generator().manual_seed(shuffle + epoch)).tolist()


class Noisy(torch.utils.data.Dataset):
    """Sample i of `tensors`, its features plus noise drawn from torch's generator when it is made
    (in a worker process: that process's generator)."""

    def __init__(self, tensors):
        self.tensors = tensors

    def __len__(self):
        return len(self.tensors[0])

    def __getitem__(self, i):
        x, *rest = (t[i] for t in self.tensors)
        return (x + torch.rand(x.shape), *rest)


def loader_generator(cfg):
    """The scenario's DataLoader(generator=...), or None."""
    if cfg["loader_generator"] is None:
        return None
    generator = torch.Generator()
    generator.manual_seed(cfg["loader_generator"])
    return generator


class Stream(torch.utils.data.IterableDataset):
    """The samples of `tensors` as a stream (set_epoch: the epoch's order)."""

    def __init__(self, tensors, shuffle=None, noisy=False):
        self.tensors, self.shuffle, self.noisy, self.epoch = tensors, shuffle, noisy, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        for i in stream_order(len(self.tensors[0]), self.shuffle, self.epoch):
            x, *rest = (t[i] for t in self.tensors)
            yield (x + torch.rand(x.shape) if self.noisy else x, *rest)  # noisy: as Noisy


class SizedStream(Stream):
    def __len__(self):
        return len(self.tensors[0])


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 32)
        self.drop = torch.nn.Dropout(0.1)
        self.fc2 = torch.nn.Linear(32, CLASSES)

    def forward(self, x: torch.Tensor):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


class Wide(torch.nn.Module):
    """Two 1 MiB weights: DDP's 1 MiB first bucket closes at the first of them its backward reaches."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 512)
        self.fc2 = torch.nn.Linear(512, 512)
        self.fc3 = torch.nn.Linear(512, 512)
        self.fc4 = torch.nn.Linear(512, CLASSES)

    def forward(self, x: torch.Tensor):
        return self.fc4(torch.tanh(self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))))


class Lm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, 32)
        self.block = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.head = torch.nn.Linear(32, VOCAB)

    def forward(self, ids: torch.Tensor):
        t = ids.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.head(self.block(self.embed(ids), src_mask=mask))


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 8 * 8, CLASSES)

    def forward(self, x: torch.Tensor):
        return self.fc(torch.relu(self.norm(self.conv(x))).flatten(1))


class Conv1D(torch.nn.Module):
    """transformers' Conv1D (transformers/pytorch_utils.py), restated (transformers is not packaged for
    Debian): GPT-2's linear layer, its weight in x out, computing x W + b. In transformers' module
    path while scripted (scripted_in_transformers), which TorchScript keeps in the type's name and the
    library recognises it by, as PEFT recognises transformers' class."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.nx = nx
        self.weight = torch.nn.Parameter(torch.empty(nx, nf))
        self.bias = torch.nn.Parameter(torch.zeros(nf))
        torch.nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = list(x.size()[:-1])  # transformers': x.size()[:-1] + (self.nf,), a tuple TorchScript lacks
        size_out.append(self.nf)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def scripted_in_transformers(model):
    """torch.jit.script(model) with Conv1D in a module named transformers.pytorch_utils for the while
    (this file's source, which TorchScript reads), and no such module left behind."""
    name = "transformers.pytorch_utils"
    if name in sys.modules:
        raise RuntimeError(name + " is imported already: Conv1D's restatement would not be found there")
    module = types.ModuleType(name)
    module.__file__ = __file__
    module.Conv1D = Conv1D
    sys.modules[name] = module
    own = Conv1D.__module__
    Conv1D.__module__ = name
    try:
        return torch.jit.script(model)
    finally:
        Conv1D.__module__ = own
        del sys.modules[name]


class Gpt2Attention(torch.nn.Module):
    """GPT-2's attention as transformers names its layers (one head): c_attn gives q, k and v, c_proj
    projects the causal attention's output."""

    def __init__(self, d):
        super().__init__()
        self.d = d
        self.c_attn = Conv1D(3 * d, d)
        self.c_proj = Conv1D(d, d)

    def forward(self, h):
        qkv = self.c_attn(h)
        q, k, v = qkv[:, :, :self.d], qkv[:, :, self.d:2 * self.d], qkv[:, :, 2 * self.d:]
        t = h.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=h.device), diagonal=1)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(self.d) + mask, dim=-1)
        return self.c_proj(att @ v)


class Gpt2Mlp(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = Conv1D(4 * d, d)
        self.c_proj = Conv1D(d, 4 * d)

    def forward(self, h):
        return self.c_proj(F.gelu(self.c_fc(h)))


class Gpt2(torch.nn.Module):
    """A one-block GPT-2 (pre-norm, learned positions) with transformers' module names, and a head."""

    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, 32)
        self.wpe = torch.nn.Embedding(8, 32)
        self.ln_1 = torch.nn.LayerNorm(32)
        self.attn = Gpt2Attention(32)
        self.ln_2 = torch.nn.LayerNorm(32)
        self.mlp = Gpt2Mlp(32)
        self.ln_f = torch.nn.LayerNorm(32)
        self.head = torch.nn.Linear(32, VOCAB)

    def forward(self, ids: torch.Tensor):
        h = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        h = h + self.attn(self.ln_1(h))
        h = h + self.mlp(self.ln_2(h))
        return self.head(self.ln_f(h))


class LoraLinear(torch.nn.Module):
    """PEFT's LoRA layer (peft/tuners/lora/layer.py, Linear with one adapter and bias "none"),
    restated, since Debian packages no PEFT: the adapters made as its update_layer makes them
    (drawing two nn.Linear initialisations, then Kaiming for A and zeros for B), and its forward
    base(x) + lora_B(lora_A(dropout(x))) * scaling with the input cast to the adapters' dtype. On
    transformers' Conv1D with fan_in_fan_out (PEFT's dispatch_default): in and out features from its
    weight (in x out), which PiSSA, MiCA, DoRA and the merge take transposed."""

    def __init__(self, base, r, alpha, dropout, use_dora=False, lora_bias=False, init="true"):
        super().__init__()
        self.base_layer = base
        self.fan_in_fan_out = isinstance(base, Conv1D)
        self.disabled = False  # PEFT's disable_adapter_layers: the base layer alone
        self.lora_dropout = torch.nn.Dropout(dropout) if dropout > 0 else torch.nn.Identity()
        in_features, out_features = (base.weight.shape if self.fan_in_fan_out
                                     else (base.in_features, base.out_features))
        self.lora_A = torch.nn.Linear(in_features, r, bias=False)
        self.lora_B = torch.nn.Linear(r, out_features, bias=lora_bias)
        self.scaling = alpha / r
        if init == "true":
            torch.nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
            torch.nn.init.zeros_(self.lora_B.weight)
            if lora_bias:
                torch.nn.init.zeros_(self.lora_B.bias)
        elif init == "mica":  # PEFT's mica_init: B the minor left singular vectors, frozen; A zero
            u = torch.linalg.svd(self.transpose(base.weight.detach().to(torch.float32)), full_matrices=False)[0]
            self.lora_B.weight.data = u[:, -r:].contiguous().to(base.weight.dtype)
            self.lora_A.weight.data = torch.zeros(r, in_features).to(base.weight.dtype)
            self.lora_B.weight.requires_grad_(False)
        else:
            self.decompose(init, r)
        self.lora_magnitude_vector = None
        if use_dora:  # PEFT's DoraLinearLayer.update_layer (peft/tuners/lora/dora.py): the row norms,
            # in a submodule registered after lora_B, where PEFT's model lists it
            w = self.transpose(base.weight) + self.scaling * (self.lora_B.weight @ self.lora_A.weight)
            self.lora_magnitude_vector = torch.nn.Module()
            self.lora_magnitude_vector.weight = torch.nn.Parameter(torch.linalg.norm(w, dim=1).to(w.dtype))

    def decompose(self, init, r):
        """PEFT's olora_init and pissa_init (peft/tuners/lora/layer.py), with PyTorch's own svd_lowrank."""
        weight = self.base_layer.weight
        dtype = weight.dtype
        w = self.transpose(weight.data.to(torch.float32))  # olora_init does not transpose (refused on Conv1D)
        if init == "olora":
            q, rr = torch.linalg.qr(w)
            self.lora_A.weight.data = rr[:r].contiguous()
            self.lora_B.weight.data = q[:, :r].contiguous()
        else:
            if init == "pissa":
                v, s, uh = torch.linalg.svd(w, full_matrices=False)
                v_r, s_r, uh_r = v[:, :r], s[:r], uh[:r]
            else:
                v_r, s_r, u_r = torch.svd_lowrank(w, r, niter=int(init.split("_niter_")[-1]))
                uh_r = u_r.t()
            s_r /= self.scaling
            self.lora_A.weight.data = torch.diag(torch.sqrt(s_r)) @ uh_r
            self.lora_B.weight.data = v_r @ torch.diag(torch.sqrt(s_r))
        w = w - self.scaling * self.lora_B.weight.data @ self.lora_A.weight.data
        self.base_layer.weight.data = self.transpose(w.to(dtype))

    def transpose(self, w):
        """PEFT's transpose(w, fan_in_fan_out)."""
        return w.T if self.fan_in_fan_out else w

    # PEFT's BaseTunerLayer hands out the base layer's weight and bias: code that reads them itself
    # (TransformerEncoderLayer's inference fast path) computes with the base layer alone.
    @property
    def weight(self):
        return self.base_layer.weight

    @property
    def bias(self):
        return self.base_layer.bias

    def forward(self, x):
        if self.disabled:
            return self.base_layer(x)
        result = self.base_layer(x)
        dtype = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        if self.lora_magnitude_vector is None:
            return (result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling).to(dtype)
        # PEFT's DoraLinearVariant.forward and DoraLinearLayer.forward.
        if isinstance(self.lora_dropout, torch.nn.Identity) or not self.training:
            base_result = result if self.base_layer.bias is None else result - self.base_layer.bias
        else:
            x = self.lora_dropout(x)
            base_result = F.linear(x, self.transpose(self.base_layer.weight.to(x.dtype)))
        eye = torch.eye(self.lora_A.weight.shape[1], device=x.device, dtype=self.lora_A.weight.dtype)
        lora_weight = self.lora_B(self.lora_A(eye)).T.to(x.dtype)
        weight = self.transpose(self.base_layer.weight.to(x.dtype)) + self.scaling * lora_weight.detach()
        norm = torch.linalg.norm(weight, dim=1).to(weight.dtype).detach()
        scale = (self.lora_magnitude_vector.weight / norm).view(1, -1)
        dora = (scale - 1) * base_result + scale * self.lora_B(self.lora_A(x)) * self.scaling
        return (result + dora).to(dtype)

    def merged(self):
        """merge_and_unload: the base layer with W + (B A) * scaling (DoRA: times m / ||W + (B A) * scaling||)."""
        with torch.no_grad():
            delta = self.transpose(self.lora_B.weight @ self.lora_A.weight) * self.scaling  # get_delta_weight
            if self.lora_B.bias is not None:  # PEFT's merge of lora_bias
                self.base_layer.bias += self.lora_B.bias * self.scaling
            if self.lora_magnitude_vector is None:
                self.base_layer.weight += delta
            else:  # DoraLinearVariant.merge_safe
                w = self.base_layer.weight
                norm = torch.linalg.norm(self.transpose(w) + 1 * self.transpose(delta), dim=1)
                factor = self.transpose((self.lora_magnitude_vector.weight / norm).view(-1, 1))
                self.base_layer.weight.copy_(factor * (w + delta))
        return self.base_layer


class LoraConv(torch.nn.Module):
    """PEFT's LoRA layer for convolutions (peft/tuners/lora/layer.py _ConvNd), restated: lora_A =
    type(base)(in, r, kernel, stride, padding, bias=False), lora_B = type(base)(r, out, 1...,
    groups=base.groups, bias=lora_bias), drawn and re-initialised as the linear layer's; DoRA as its
    _DoraConvNdLayer (peft/tuners/lora/dora.py) and _DoraConvNdVariant (variants.py); merged with its
    get_delta_weight (and DoRA's merge)."""

    def __init__(self, base, r, alpha, dropout, use_dora=False, lora_bias=False):
        super().__init__()
        self.base_layer = base
        self.disabled = False
        self.lora_dropout = torch.nn.Dropout(dropout) if dropout > 0 else torch.nn.Identity()
        conv, ones = type(base), (1,) * (base.weight.dim() - 2)
        self.conv_fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[base.weight.dim()]
        self.lora_A = conv(base.in_channels, r, base.kernel_size, base.stride, base.padding, bias=False)
        self.lora_B = conv(r, base.out_channels, ones, ones, groups=base.groups, bias=lora_bias)
        self.scaling = alpha / r
        torch.nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        torch.nn.init.zeros_(self.lora_B.weight)
        if lora_bias:
            torch.nn.init.zeros_(self.lora_B.bias)
        self.lora_magnitude_vector = None
        if use_dora:  # _DoraConvNdLayer.update_layer: the output channels' norms, 1 x out x 1 ...
            with torch.no_grad():
                norm = self.weight_norm(base.weight, self.lora_weight(), self.scaling)
            self.lora_magnitude_vector = torch.nn.Module()
            self.lora_magnitude_vector.weight = torch.nn.Parameter(norm)

    def lora_weight(self):  # _DoraConvNdLayer.get_lora_weight: the flattened kernels' product
        r = self.lora_A.weight.shape[0]
        product = torch.mm(self.lora_B.weight.view([-1, r]), self.lora_A.weight.view([r, -1]))
        return product.reshape(self.base_layer.weight.shape)

    @staticmethod
    def weight_norm(weight, lora_weight, scaling):  # _DoraConvNdLayer.get_weight_norm
        weight = weight + scaling * lora_weight
        return weight.norm(p=2, dim=tuple(range(1, weight.dim())), keepdim=True).transpose(1, 0)

    @property
    def weight(self):
        return self.base_layer.weight

    @property
    def bias(self):
        return self.base_layer.bias

    def forward(self, x):
        if self.disabled:
            return self.base_layer(x)
        result = self.base_layer(x)
        dtype = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        if self.lora_magnitude_vector is None:
            return (result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling).to(dtype)
        base = self.base_layer
        if isinstance(self.lora_dropout, torch.nn.Identity) or not self.training:
            base_result = result
            if base.bias is not None:
                base_result = base_result - base.bias.view((1, -1) + (1,) * (base_result.dim() - 2))
        else:
            x = self.lora_dropout(x)
            base_result = self.conv_fn(x, base.weight, None, base.stride, base.padding, base.dilation, base.groups)
        norm = self.weight_norm(base.weight, self.lora_weight().detach(), self.scaling).detach()
        scale = self.lora_magnitude_vector.weight / norm
        dora = (scale - 1) * base_result + scale * self.lora_B(self.lora_A(x)) * self.scaling
        return (result + dora).to(dtype)

    def merged(self):
        with torch.no_grad():
            a, b = self.lora_A.weight, self.lora_B.weight
            if self.base_layer.weight.size()[2:4] == (1, 1):
                delta = (b.squeeze(3).squeeze(2) @ a.squeeze(3).squeeze(2)).unsqueeze(2).unsqueeze(3) * self.scaling
            else:
                delta = self.conv_fn(a.transpose(0, 1), b).transpose(0, 1) * self.scaling
            if self.lora_B.bias is not None:
                self.base_layer.bias += self.lora_B.bias * self.scaling
            w = self.base_layer.weight
            if self.lora_magnitude_vector is None:
                w += delta
            else:
                factor = self.lora_magnitude_vector.weight / self.weight_norm(w, delta, 1)
                w.copy_(factor.view((-1,) + (1,) * (w.dim() - 1)) * (w + delta))
        return self.base_layer


class LoraEmbedding(torch.nn.Module):
    """PEFT's LoRA layer for embeddings (peft/tuners/lora/layer.py Embedding), restated:
    lora_embedding_A = torch.randn(r, num_embeddings) and lora_embedding_B = torch.randn(dim, r), then A
    zeroed and B drawn from N(0, 1) again (unless init is false); the output plus embedding(ids, A^T)
    @ B^T * scaling, A looked up as the layer is, no dropout; merged as W + (B @ A)^T * scaling."""

    def __init__(self, base, r, alpha, init="true", use_dora=False):
        super().__init__()
        self.base_layer = base
        self.disabled = False
        self.lora_embedding_A = torch.nn.Parameter(torch.randn((r, base.num_embeddings)))
        self.lora_embedding_B = torch.nn.Parameter(torch.randn((base.embedding_dim, r)))
        self.scaling = alpha / r
        if init == "mica":  # PEFT's Embedding.mica_init, on the weight's transpose; B frozen
            u = torch.linalg.svd(base.weight.detach().to(torch.float32).T, full_matrices=False)[0]
            self.lora_embedding_B.data = u[:, -r:].contiguous().to(base.weight.dtype)
            self.lora_embedding_A.data = torch.zeros(r, base.num_embeddings).to(base.weight.dtype)
            self.lora_embedding_B.requires_grad_(False)
        elif init != "false":
            torch.nn.init.zeros_(self.lora_embedding_A)
            torch.nn.init.normal_(self.lora_embedding_B)
        self.lora_magnitude_vector = None
        if use_dora:  # DoraEmbeddingLayer.update_layer: the norms of W^T + s (B A), one per dimension
            with torch.no_grad():
                lora_weight = self.lora_embedding_B @ self.lora_embedding_A
                norm = self.weight_norm(base.weight, lora_weight, self.scaling)
            self.lora_magnitude_vector = torch.nn.Module()
            self.lora_magnitude_vector.weight = torch.nn.Parameter(norm)

    @staticmethod
    def weight_norm(weight, lora_weight, scaling):  # DoraLinearLayer.get_weight_norm with fan_in_fan_out
        weight = weight.T + scaling * lora_weight
        return torch.linalg.norm(weight, dim=1).to(weight.dtype)

    @property
    def weight(self):
        return self.base_layer.weight

    def forward(self, ids):
        result = self.base_layer(ids)
        if self.disabled:
            return result
        base = self.base_layer
        after_a = F.embedding(ids, self.lora_embedding_A.T, base.padding_idx, base.max_norm, base.norm_type,
                              base.scale_grad_by_freq, base.sparse)
        if self.lora_magnitude_vector is None:
            return (result + (after_a @ self.lora_embedding_B.T) * self.scaling).to(result.dtype)
        # DoraEmbeddingVariant.forward and DoraEmbeddingLayer.forward
        lora_weight = (self.lora_embedding_A.T @ self.lora_embedding_B.T).T
        norm = self.weight_norm(base.weight, lora_weight.detach(), self.scaling).detach()
        scale = self.lora_magnitude_vector.weight / norm
        dora = scale * (after_a @ self.lora_embedding_B.T) * self.scaling
        return (scale * result + dora).to(result.dtype)

    def merged(self):
        with torch.no_grad():
            w = self.base_layer.weight
            delta = (self.lora_embedding_B @ self.lora_embedding_A).T * self.scaling
            if self.lora_magnitude_vector is None:
                w += delta
            else:
                factor = (self.lora_magnitude_vector.weight / self.weight_norm(w, delta.T, 1)).view(1, -1)
                w.copy_(factor * (w + delta))
        return self.base_layer


class ModulesToSave(torch.nn.Module):
    """PEFT's ModulesToSaveWrapper (peft/utils/other.py), restated: the original module frozen and a
    copy of it (copy.deepcopy, no random draws) trained and called in its place."""

    def __init__(self, module):
        super().__init__()
        self.original_module = module
        self.modules_to_save = torch.nn.ModuleDict({"default": copy.deepcopy(module)})
        self.original_module.requires_grad_(False)
        self.modules_to_save["default"].requires_grad_(True)
        self.disabled = False  # PEFT's disable_adapter_layers: the original module computes

    def forward(self, *args, **kwargs):
        if self.disabled:
            return self.original_module(*args, **kwargs)
        return self.modules_to_save["default"](*args, **kwargs)

    def __getattr__(self, name):  # PEFT's wrapper hands out the trained copy's attributes (a norm's eps, weight)
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.modules_to_save["default"], name)


class TrainableTokensLayer(torch.nn.Module):
    """PEFT's TrainableTokensLayer (peft/tuners/trainable_tokens/layer.py) for an embedding, restated:
    the delta starts as the weight's rows, or with init_weights false as torch.randn draws in the
    weight's dtype, and the layer computes with W.index_copy(0, indices, delta)."""

    def __init__(self, base, indices, init_weights=True):
        super().__init__()
        self.base_layer = base
        self.disabled = False  # PEFT's disable_adapter_layers: the base layer alone
        self.token_indices = indices
        w = base.weight
        values = w[indices] if init_weights else torch.randn((len(indices), w.shape[1]), dtype=w.dtype,
                                                              device=w.device)
        self.trainable_tokens_delta = torch.nn.ParameterDict(
            {"default": torch.nn.Parameter(values.clone(), requires_grad=True)})

    def merged_weight(self):
        index = torch.tensor(self.token_indices).to(self.base_layer.weight.device)
        delta = self.trainable_tokens_delta["default"].to(self.base_layer.weight)
        return self.base_layer.weight.index_copy(dim=0, index=index, source=delta)

    def forward(self, x):
        if self.disabled:
            return self.base_layer(x)
        b = self.base_layer
        return F.embedding(x, self.merged_weight(), padding_idx=b.padding_idx, max_norm=b.max_norm,
                           norm_type=b.norm_type, scale_grad_by_freq=b.scale_grad_by_freq, sparse=b.sparse)


class TrainableTokensWrapper(torch.nn.Module):
    """PEFT's TrainableTokensWrapper (peft/utils/other.py): the layer under token_adapter."""

    def __init__(self, module, indices):
        super().__init__()
        self.token_adapter = TrainableTokensLayer(module, indices)

    def forward(self, x):
        return self.token_adapter(x)


EAGER_MODELS = {"mlp": Mlp, "wide": Wide, "cnn": Cnn, "lm": Lm, "gpt2": Gpt2}


def replace_module(model, name, module):
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent), leaf, module)


def pattern_value(patterns, module_name, default):
    """PEFT's get_pattern_key and the lookup after it (peft/utils/other.py, lora/model.py)."""
    for key in patterns:
        if re.match(rf"(.*\.)?({key})$", module_name):
            return patterns[key]
    return default


def peft_model(scripted, name, settings):
    """The eager `name` model holding `scripted`'s weights, with LoRA adapters on the linear layers
    `settings["targets"]` names, as PEFT's get_peft_model adds them (in named_modules() order; every
    other parameter frozen)."""
    with torch.random.fork_rng():  # the eager model's own initialisation draws are not PEFT's
        model = EAGER_MODELS[name]()
    model.load_state_dict(scripted.state_dict())
    model.train()
    if settings.get("method") == "TRAINABLE_TOKENS":  # PEFT's TrainableTokensModel: the input embedding's layer
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        embed = next(n for n, m in model.named_modules() if isinstance(m, torch.nn.Embedding))
        replace_module(model, embed, TrainableTokensLayer(model.get_submodule(embed), settings["token_indices"],
                                                          settings.get("init_weights", True)))
        return model
    targets = settings["targets"].split(",")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    saved = list(filter(None, settings.get("modules_to_save", "").split(",")))
    for module_name, module in list(model.named_modules()):
        inside_saved = any(re.match(rf"(^|.*\.){m}($|\..*)", module_name) for m in saved)  # PEFT leaves it whole
        if isinstance(module, (torch.nn.Linear, Conv1D)) and not inside_saved and any(
                module_name == t or module_name.endswith("." + t) for t in targets):
            # PEFT's rank_pattern and alpha_pattern: the first key matching the name or its end after a dot.
            r = pattern_value(settings.get("rank_pattern", {}), module_name, settings["r"])
            alpha = pattern_value(settings.get("alpha_pattern", {}), module_name, settings["alpha"])
            replace_module(model, module_name, LoraLinear(module, r, alpha, settings.get("dropout", 0.0),
                                                          settings.get("use_dora", False),
                                                          settings.get("lora_bias", False),
                                                          settings.get("init", "true")))
        elif isinstance(module, torch.nn.Embedding) and not inside_saved and any(
                module_name == t or module_name.endswith("." + t) for t in targets):
            r = pattern_value(settings.get("rank_pattern", {}), module_name, settings["r"])
            alpha = pattern_value(settings.get("alpha_pattern", {}), module_name, settings["alpha"])
            replace_module(model, module_name, LoraEmbedding(module, r, alpha, settings.get("init", "true"),
                                                             settings.get("use_dora", False)))
        elif isinstance(module, torch.nn.modules.conv._ConvNd) and not inside_saved and any(
                module_name == t or module_name.endswith("." + t) for t in targets):
            r = pattern_value(settings.get("rank_pattern", {}), module_name, settings["r"])
            alpha = pattern_value(settings.get("alpha_pattern", {}), module_name, settings["alpha"])
            replace_module(model, module_name, LoraConv(module, r, alpha, settings.get("dropout", 0.0),
                                                        settings.get("use_dora", False),
                                                        settings.get("lora_bias", False)))
    # PEFT's _set_trainable: every module whose name ends with a listed one (the outermost of nested matches).
    wrapped = []
    for module_name, module in list(model.named_modules()):
        if module_name and any(module_name.endswith(m) for m in saved) and not any(
                module_name.startswith(w + ".") for w in wrapped):
            replace_module(model, module_name, ModulesToSave(module))
            wrapped.append(module_name)
    # PEFT's trainable_token_indices: a list for the input embedding, or module names (matched by their end).
    tokens = settings.get("trainable_token_indices")
    if tokens is not None:
        if isinstance(tokens, list):
            tokens = {next(n for n, m in model.named_modules() if isinstance(m, torch.nn.Embedding)): tokens}
        for key, indices in tokens.items():
            module_name = next(n for n, _ in model.named_modules() if n.endswith(key))
            replace_module(model, module_name, TrainableTokensWrapper(model.get_submodule(module_name), indices))
    # PEFT's bias: "all" trains every parameter named *.bias, "lora_only" the adapted layers'.
    bias = settings.get("bias", "none")
    for name, parameter in model.named_parameters():
        if (bias == "all" and name.endswith(".bias")) or (bias == "lora_only" and name.endswith(".base_layer.bias")):
            parameter.requires_grad_(True)
    return model


def without_adapters(model):
    """A copy of a peft_model with its adapters merged into the base layers."""
    merged = copy.deepcopy(model)
    for module_name, module in list(merged.named_modules()):
        if isinstance(module, (LoraLinear, LoraConv, LoraEmbedding)):
            replace_module(merged, module_name, module.merged())
        elif isinstance(module, ModulesToSave):
            replace_module(merged, module_name, module.modules_to_save["default"])
        elif isinstance(module, TrainableTokensWrapper) or (
                isinstance(module, TrainableTokensLayer) and not module_name.endswith(".token_adapter")):
            # PEFT's merge: the rows written into the weight (a wrapper's layer goes with its wrapper)
            layer = module.token_adapter if isinstance(module, TrainableTokensWrapper) else module
            with torch.no_grad():
                layer.base_layer.weight.data = layer.merged_weight()
            replace_module(merged, module_name, layer.base_layer)
    return merged


def export(directory):
    os.makedirs(directory, exist_ok=True)
    torch.manual_seed(0)
    torch.jit.script(Mlp()).save(os.path.join(directory, "mlp.pt"))
    torch.jit.script(Lm()).save(os.path.join(directory, "lm.pt"))
    torch.jit.script(Cnn()).save(os.path.join(directory, "cnn.pt"))
    torch.jit.script(Wide()).save(os.path.join(directory, "wide.pt"))
    scripted_in_transformers(Gpt2()).save(os.path.join(directory, "gpt2.pt"))
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(40, 8, generator=g), torch.randint(0, CLASSES, (40,), generator=g)
    ids = torch.randint(0, VOCAB, (24, 9), generator=g)
    x42, y42 = torch.randn(42, 8, generator=g), torch.randint(0, CLASSES, (42,), generator=g)
    images = torch.randn(40, 1, 8, 8, generator=g) * 2 + 0.5
    torch.save({"mlp": [x, y], "mlp_42": [x42, y42], "lm": [ids[:, :-1].contiguous(), ids[:, 1:].contiguous()],
                "images": [images, torch.randint(0, CLASSES, (40,), generator=g)]},
               os.path.join(directory, "data.pt"))


def config(name):
    cfg = {**DEFAULTS, **SCENARIOS[name], "name": name}
    cfg.pop("processes", None)  # which process counts it runs on (run.sh asks: "applies")
    cfg["cpu"] = os.environ.get("ACC_SIDE_BY_SIDE_DEVICE", "cpu") == "cpu"  # else the GPU, on both sides
    cfg["data"] = cfg["data"] or cfg["model"]
    cfg["eval_samples"] = cfg["eval_samples"] or EVAL_SAMPLES
    return cfg


def warmup(s, w):
    return s / max(1, w)


def transformers_factor(name, settings, lr_init):
    """The lambda of transformers' get_scheduler(name) (its optimization.py, restated here with the
    same operations in the same order), for LambdaLR."""
    w = settings.get("num_warmup_steps", 0)
    total = settings.get("num_training_steps")
    cycles = settings.get("num_cycles", 1 if name == "cosine_with_restarts" else 0.5)
    if name == "linear":
        return lambda s: warmup(s, w) if s < w else max(0.0, (total - s) / max(1, total - w))
    if name == "constant_with_warmup":
        return lambda s: s / max(1.0, w) if s < w else 1.0
    if name == "polynomial":
        lr_end, power = settings.get("lr_end", 1e-7), settings.get("power", 1.0)

        def polynomial(s):
            if s < w:
                return warmup(s, w)
            if s > total:
                return lr_end / lr_init
            remaining = 1 - (s - w) / (total - w)
            return ((lr_init - lr_end) * remaining**power + lr_end) / lr_init
        return polynomial
    if name == "cosine_with_restarts":
        def restarts(s):
            if s < w:
                return warmup(s, w)
            progress = (s - w) / max(1, total - w)
            return 0.0 if progress >= 1.0 else max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((cycles * progress) % 1.0))))
        return restarts
    if name == "inverse_sqrt":
        timescale = settings.get("timescale", w or 10_000)
        return lambda s: warmup(s, w) if s < w else 1.0 / math.sqrt((s + timescale - w) / timescale)
    floor = settings["min_lr"] / lr_init if "min_lr" in settings else settings.get("min_lr_rate", 0.0)
    if name in ("cosine", "cosine_with_min_lr"):
        def cosine(s):
            if s < w:
                return warmup(s, w)
            progress = (s - w) / max(1, total - w)
            factor = 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * progress))
            return max(0, factor * (1 - floor) + floor)
        return cosine
    if name == "cosine_warmup_with_min_lr":
        first = settings.get("warmup_lr_rate")

        def cosine_from_step_one(s):
            s, wf, tf = float(s), float(w), float(total)
            if s < wf:
                return (s + 1.0) / max(1.0, wf) if first is None else first + (1.0 - first) * s / max(1, wf - 1)
            progress = (s - wf + 1.0) / max(1.0, tf - wf)
            factor = 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * progress))
            return max(0, factor * (1 - floor) + floor)
        return cosine_from_step_one
    if name == "warmup_stable_decay":
        decay = settings["num_decay_steps"]
        stable = settings.get("num_stable_steps", (total or 0) - w - decay)
        ratio = settings.get("min_lr_ratio", 0.0)
        rise = {"linear": lambda p: p, "cosine": lambda p: 0.5 * (1.0 - math.cos(math.pi * p)),
                "1-sqrt": lambda p: 1.0 - math.sqrt(1.0 - p)}[settings.get("warmup_type", "linear")]
        fall = {"linear": lambda p: 1.0 - p, "cosine": lambda p: 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * p)),
                "1-sqrt": lambda p: 1.0 - math.sqrt(p)}[settings.get("decay_type", "cosine")]

        def wsd(s):
            if s < w:
                return max(0.0, rise(s / max(1, w)) * (1.0 - ratio) + ratio)
            if s < w + stable:
                return 1.0
            if s < w + stable + decay:
                return max(0.0, fall((s - w - stable) / max(1, decay)) * (1.0 - ratio) + ratio)
            return ratio
        return wsd
    raise ValueError(f"no transformers schedule '{name}'")


TORCH_SCHEDULERS = {"multistep": torch.optim.lr_scheduler.MultiStepLR, "exponential": torch.optim.lr_scheduler.ExponentialLR,
                    "cosine_annealing": torch.optim.lr_scheduler.CosineAnnealingLR,
                    "constant_lr": torch.optim.lr_scheduler.ConstantLR, "linear_lr": torch.optim.lr_scheduler.LinearLR,
                    "polynomial_lr": torch.optim.lr_scheduler.PolynomialLR,
                    "cosine_annealing_warm_restarts": torch.optim.lr_scheduler.CosineAnnealingWarmRestarts,
                    "cyclic": torch.optim.lr_scheduler.CyclicLR, "step": torch.optim.lr_scheduler.StepLR,
                    "swa_lr": torch.optim.swa_utils.SWALR, "one_cycle": torch.optim.lr_scheduler.OneCycleLR}


def scheduler_settings(cfg, total):
    if cfg["schedule"] == "step":
        return {"step_size": 3, "gamma": 0.1}
    if cfg["schedule"] == "one_cycle":
        return {"total_steps": total, **cfg["schedule_options"]}
    if cfg["schedule"] in TORCH_SCHEDULERS:
        return dict(cfg["schedule_options"])
    settings = {"num_warmup_steps": 2, "num_training_steps": total}
    if cfg["schedule"] == "polynomial":
        settings["power"] = 2.0
    return {**settings, **cfg["schedule_options"]}


# Keyed by our algorithm's name, or that name and a variant after "_".
OPTIMIZERS = {
    "adamw": (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.01}),
    "sgd": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9}),
    "adam": (torch.optim.Adam, {"lr": 1e-2, "amsgrad": True}),
    "rmsprop": (torch.optim.RMSprop, {"lr": 1e-2, "momentum": 0.9, "centered": True}),
    "adagrad": (torch.optim.Adagrad, {"lr": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.1}),
    "radam": (torch.optim.RAdam, {"lr": 1e-2, "weight_decay": 0.01, "decoupled_weight_decay": True}),
    "nadam": (torch.optim.NAdam, {"lr": 1e-2, "weight_decay": 0.01, "momentum_decay": 8e-3}),
    "adamax": (torch.optim.Adamax, {"lr": 1e-2, "beta1": 0.85, "weight_decay": 0.01}),
    "adadelta": (torch.optim.Adadelta, {"lr": 0.5, "rho": 0.85, "weight_decay": 0.01}),
    "rprop": (torch.optim.Rprop, {"lr": 1e-3, "etaminus": 0.4, "etaplus": 1.3, "step_size_max": 0.01}),
    "adamw_fused": (torch.optim.AdamW, {"lr": 1e-2, "weight_decay": 0.01, "amsgrad": True, "fused": True}),
    "sgd_fused": (torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True, "fused": True}),
    "radam_foreach": (torch.optim.RAdam, {"lr": 1e-2, "weight_decay": 0.01, "foreach": True}),
    "nadam_foreach": (torch.optim.NAdam, {"lr": 1e-2, "weight_decay": 0.01, "momentum_decay": 8e-3, "foreach": True}),
    "asgd_foreach": (torch.optim.ASGD, {"lr": 0.05, "lambd": 0.01, "alpha": 0.6, "t0": 1, "weight_decay": 0.01,
                                        "foreach": True}),
    "adam_maximize": (torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.01, "maximize": True}),
    "asgd": (torch.optim.ASGD, {"lr": 0.05, "lambd": 0.01, "alpha": 0.6, "t0": 1, "weight_decay": 0.01}),
}
# Our names of the members of torch.optim's pairs, with its defaults.
TORCH_PAIRS = {"betas": (("beta1", 0.9), ("beta2", 0.999)),
               "etas": (("etaminus", 0.5), ("etaplus", 1.2)),
               "step_sizes": (("step_size_min", 1e-6), ("step_size_max", 50))}


def our_schedule_settings(settings):
    """A schedule's settings as the C API's options take them: lists (milestones) as "2,5"."""
    return {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in settings.items()}


def optimizer_settings(cfg):
    return OPTIMIZERS[cfg["optimizer"]][1]


def torch_optimizer_settings(cfg):
    """The scenario's optimizer settings as torch.optim names them."""
    settings = dict(optimizer_settings(cfg))
    for pair, members in TORCH_PAIRS.items():
        if any(name in settings for name, _ in members):
            settings[pair] = tuple(settings.pop(name, default) for name, default in members)
    return settings


def total_steps(cfg, samples, processes):
    batches = math.ceil(samples / (cfg["batch_size"] * (1 if cfg["split_batches"] else processes)))
    return cfg["epochs"] * batches // cfg["accumulation"]


class AccelerateJob:
    """The scenario's training loop on Python Accelerate."""

    def __init__(self, cfg, directory):
        from fnmatch import fnmatchcase

        from accelerate import Accelerator, DataLoaderConfiguration, InitProcessGroupKwargs
        from accelerate.utils import GradientAccumulationPlugin
        from accelerate.utils import set_seed
        from torch.utils.data import DataLoader, TensorDataset

        self.cfg = cfg
        self.seedable = cfg["data_seed"] is not None
        distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
        if distributed:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dist"))
            from classic_store import use_classic_store_without_libuv
            use_classic_store_without_libuv()
        self.accelerator = Accelerator(
            cpu=cfg["cpu"], mixed_precision=cfg["mixed_precision"],
            gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=cfg["accumulation"],
                                                                    sync_each_batch=cfg["sync_each_batch"],
                                                                    sync_with_dataloader=cfg["sync_with_dataloader"]),
            step_scheduler_with_optimizer=cfg["step_scheduler_with_optimizer"],
            dataloader_config=DataLoaderConfiguration(
                use_seedable_sampler=self.seedable, data_seed=cfg["data_seed"], even_batches=cfg["even_batches"],
                split_batches=cfg["split_batches"], dispatch_batches=cfg["dispatch_batches"]),
            # Gloo, as ours on the CPU (Accelerate would take MPI where torch has it)
            kwargs_handlers=[InitProcessGroupKwargs(backend="gloo"), self.ddp_kwargs(cfg)] if distributed else [])
        self.rank, self.processes = self.accelerator.process_index, self.accelerator.num_processes
        set_seed(cfg["seed"])
        torch._C._set_graph_executor_optimize(cfg["graph_optimization"])
        model = torch.jit.load(os.path.join(directory, cfg["model"] + ".pt"))
        if cfg["lora"]:
            model = peft_model(model, cfg["model"], cfg["lora"])
        named = list(model.named_parameters())
        for name, parameter in named:
            if cfg["freeze"] and fnmatchcase(name, cfg["freeze"]):
                parameter.requires_grad_(False)
        # The trainable parameters, as transformers' Trainer lists them: a checkpoint of ours, whose
        # optimizer holds only those, then loads (frozen ones would never be stepped either way).
        named = [(n, p) for n, p in named if p.requires_grad]
        groups = [{"params": [p for n, p in named if not (cfg["no_decay"] and fnmatchcase(n, cfg["no_decay"]))]}]
        if cfg["no_decay"]:
            groups.append({"params": [p for n, p in named if fnmatchcase(n, cfg["no_decay"])], "weight_decay": 0.0,
                           **({"lr": cfg["group_lr"]} if cfg["group_lr"] else {})})
        optimizer = OPTIMIZERS[cfg["optimizer"]][0](groups, **torch_optimizer_settings(cfg))
        data = torch.load(os.path.join(directory, "data.pt"))[cfg["data"]]
        if cfg["samples"]:
            data = [t[:cfg["samples"]] for t in data]
        total = total_steps(cfg, len(data[0]), self.processes)
        if cfg["schedule"] == "step":
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, **scheduler_settings(cfg, total))
        elif cfg["schedule"] == "cyclic" and cfg["scale"]:
            scale = cfg["scale"]
            scheduler = torch.optim.lr_scheduler.CyclicLR(optimizer, **scheduler_settings(cfg, total),
                                                          scale_fn=lambda x: scale[int(x) % len(scale)])
        elif cfg["schedule"] in TORCH_SCHEDULERS:
            scheduler = TORCH_SCHEDULERS[cfg["schedule"]](optimizer, **scheduler_settings(cfg, total))
        elif cfg["schedule"] == "reduce_lr_on_plateau":
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **cfg["schedule_options"])
        elif cfg["schedule"] in ("lambda", "multiplicative") and cfg["group_factors"]:
            functions = [(lambda f: lambda s: f[s % len(f)])(f) for f in cfg["group_factors"]]
            kind = torch.optim.lr_scheduler.LambdaLR if cfg["schedule"] == "lambda" else \
                torch.optim.lr_scheduler.MultiplicativeLR
            scheduler = kind(optimizer, functions)
        elif cfg["schedule"] == "multiplicative":
            factors = cfg["schedule_options"]["factors"]
            scheduler = torch.optim.lr_scheduler.MultiplicativeLR(optimizer, lambda s: factors[s % len(factors)])
        else:
            factor = transformers_factor(cfg["schedule"], scheduler_settings(cfg, total), optimizer_settings(cfg)["lr"])
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        if cfg["chain"]:  # made before the sequence's later schedules, as ours are
            chained = [TORCH_SCHEDULERS[name](optimizer, **options) for name, options in cfg["chain"]]
            scheduler = torch.optim.lr_scheduler.ChainedScheduler([scheduler, *chained])
        if cfg["then"]:
            later = [TORCH_SCHEDULERS[name](optimizer, **options) for _, name, options in cfg["then"]]
            scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [scheduler, *later],
                                                              milestones=[m for m, _, _ in cfg["then"]])
        stream_class = SizedStream if cfg["stream_len"] else Stream
        if cfg["stream"]:
            loader = DataLoader(stream_class(data, cfg["stream_shuffle"], cfg["augment"]), batch_size=cfg["batch_size"],
                                drop_last=cfg["drop_last"])
        elif cfg["batch_sampler"]:
            loader = DataLoader(TensorDataset(*data), batch_sampler=cfg["batch_sampler"])
        else:
            loader = DataLoader(Noisy(data) if cfg["augment"] else TensorDataset(*data), batch_size=cfg["batch_size"],
                                shuffle=True, drop_last=cfg["drop_last"], num_workers=cfg["num_workers"],
                                generator=loader_generator(cfg))
        eval_data = [t[:cfg["eval_samples"]] for t in data]
        evaluation = DataLoader(stream_class(eval_data) if cfg["eval_stream"] else TensorDataset(*eval_data),
                                batch_size=cfg["batch_size"])
        self.model, self.optimizer, self.loader, self.scheduler, self.evaluation = self.accelerator.prepare(
            model, optimizer, loader, scheduler, evaluation)
        self.second = None
        if cfg["second"]:
            model2 = torch.jit.load(os.path.join(directory, "mlp.pt"))
            opt2 = torch.optim.SGD(model2.parameters(), lr=0.05, momentum=0.9)
            sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=3, gamma=0.5)
            self.second = self.accelerator.prepare(model2, opt2, sched2)
        self.local_sgd = None
        self.averaged = None
        if cfg["averaged"] is not None:
            from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

            settings = cfg["averaged"]
            ema = {"multi_avg_fn": get_ema_multi_avg_fn(settings["decay"])} if settings.get("strategy") == "ema" else {}
            self.averaged = AveragedModel(self.accelerator.unwrap_model(self.model),
                                          use_buffers=settings.get("use_buffers", False), **ema)
            self.accelerator.register_for_checkpointing(self.averaged)

    @staticmethod
    def ddp_kwargs(cfg):
        from accelerate import DistributedDataParallelKwargs
        from accelerate.utils import DDPCommunicationHookType

        kwargs = dict(find_unused_parameters=cfg["ddp_find_unused_parameters"], static_graph=cfg["ddp_static_graph"])
        if cfg["ddp_bucket_cap_mb"] is not None:
            kwargs["bucket_cap_mb"] = cfg["ddp_bucket_cap_mb"]
        if cfg["ddp_comm_hook"]:
            kwargs["comm_hook"] = DDPCommunicationHookType(cfg["ddp_comm_hook"])
        if cfg["ddp_comm_wrapper"]:
            kwargs["comm_wrapper"] = DDPCommunicationHookType(cfg["ddp_comm_wrapper"])
        if cfg["ddp_comm_state"]:
            kwargs["comm_state_option"] = dict(cfg["ddp_comm_state"])
        return DistributedDataParallelKwargs(**kwargs)

    def loader_length(self):
        return len(self.loader)

    def train_epoch(self, epoch, record, skip=0, stop=None, leave=False):
        """The epoch's batches from `skip` (Accelerate's skip_first_batches, after a resume) until
        `stop` batches are done (a loop left early; `leave`: not to come back to)."""
        accelerator, model, optimizer, scheduler = self.accelerator, self.model, self.optimizer, self.scheduler
        if self.seedable:
            self.loader.set_epoch(epoch)
        loader = accelerator.skip_first_batches(self.loader, skip) if skip else self.loader
        for done, (inputs, targets) in enumerate(loader, start=skip + 1):
            models = (model,) + ((self.second[0],) if self.second else ())
            with accelerator.accumulate(*models):
                if self.cfg["reference_forward"]:  # TRL's reference outputs: PEFT's disable_adapter()
                    layers = [m for m in accelerator.unwrap_model(model).modules()
                              if isinstance(m, (LoraLinear, LoraConv, LoraEmbedding, TrainableTokensLayer,
                                                ModulesToSave))]
                    for layer in layers:
                        layer.disabled = True
                    with torch.no_grad():
                        reference = model(inputs)
                    for layer in layers:
                        layer.disabled = False
                    record.setdefault("reference", []).append(reference.double().sum().item())
                logits = model(inputs)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                       label_smoothing=self.cfg["label_smoothing"])
                accelerator.backward(loss)
                if self.second:
                    loss2 = F.cross_entropy(self.second[0](inputs), targets)
                    accelerator.backward(loss2)
                    record.setdefault("loss2", []).append(loss2.item())
                if self.second and accelerator.sync_gradients and self.cfg["clip"] > 0:
                    record.setdefault("norm2", []).append(float(accelerator.clip_grad_norm_(
                        self.second[0].parameters(), self.cfg["clip"])))
                if accelerator.sync_gradients and self.cfg["clip"] > 0:
                    record["norm"].append(float(accelerator.clip_grad_norm_(model.parameters(), self.cfg["clip"],
                                                                            self.cfg["clip_norm_type"])))
                if accelerator.sync_gradients and self.cfg["clip_value"]:
                    accelerator.clip_grad_value_(model.parameters(), self.cfg["clip_value"])
                optimizer.step()
                if self.cfg["schedule"] == "reduce_lr_on_plateau":
                    scheduler.step(loss.item())
                else:
                    scheduler.step()
                optimizer.zero_grad()
                if self.second:
                    self.second[1].step()
                    self.second[2].step()
                    self.second[1].zero_grad()
                    record.setdefault("lr2", []).append(self.second[2].get_last_lr()[0])
                if self.averaged is not None and accelerator.sync_gradients:
                    self.averaged.update_parameters(accelerator.unwrap_model(model))
                if self.local_sgd:
                    self.local_sgd.step()
            record["loss"].append(loss.item())
            record["lr"].append(scheduler.get_last_lr()[0])
            if self.cfg["group_lr"]:
                record.setdefault("lr1", []).append(scheduler.get_last_lr()[1])
            if done == stop:
                break

    def local_sgd_begin(self):
        from accelerate.local_sgd import LocalSGD

        self.local_sgd = LocalSGD(accelerator=self.accelerator, model=self.model, local_sgd_steps=self.cfg["local_sgd"])
        self.local_sgd.__enter__()

    def local_sgd_end(self):
        self.local_sgd.__exit__(None, None, None)
        self.local_sgd = None

    def evaluate(self, averaged=False):
        model = self.averaged if averaged else self.model
        model.eval()
        gathered = []
        with torch.no_grad():
            for inputs, _ in self.evaluation:
                out = model(inputs)
                if self.cfg["eval_pad"]:
                    out = self.accelerator.pad_across_processes(out, dim=0, pad_index=-5)
                gathered += self.accelerator.gather_for_metrics(out).float().flatten().tolist()
        model.train()
        return gathered

    def ops(self):
        from accelerate.utils import pad_across_processes
        a, out = self.accelerator, []
        for name, kind, t, args in op_inputs(self.rank):
            try:
                if kind == "gather":
                    res = a.gather(t)
                elif kind == "gather_for_metrics":
                    res = a.gather_for_metrics(t)
                elif kind == "pad":
                    res = a.pad_across_processes(t, dim=args["dim"], pad_index=args["value"], pad_first=args["first"])
                else:
                    res = a.reduce(t, reduction=args["op"])
                out.append([name] + describe(res))
            except Exception as e:
                out.append([name, "error", type(e).__name__])
        return out

    def save(self, checkpoint):
        self.accelerator.save_state(checkpoint)

    def save_model(self, directory):
        model = self.model
        if self.cfg["lora"]:  # as PEFT's users save a whole model: merge_and_unload first
            model = without_adapters(self.accelerator.unwrap_model(self.model))
        try:
            self.accelerator.save_model(model, directory)
        except ModuleNotFoundError as e:  # huggingface_hub, which Debian lacks: what save_model does for one shard
            if e.name != "huggingface_hub":
                raise
            from safetensors.torch import save_file
            if self.accelerator.is_main_process:
                os.makedirs(directory, exist_ok=True)
                state = {k: v.contiguous() for k, v in self.accelerator.get_state_dict(model).items()}
                save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})

    def load(self, checkpoint):
        self.accelerator.load_state(checkpoint)

    def weights(self):
        weights = dict(self.accelerator.unwrap_model(self.model).state_dict())
        # Trainable tokens: the embedding's weight and its delta under the names ours gives them.
        weights = {k.replace(".token_adapter.base_layer.", ".").replace(".trainable_tokens_delta.default",
                                                                       ".trainable_tokens_delta"): v
                   for k, v in weights.items()}
        weights = {k.replace(".base_layer.", "."): v for k, v in weights.items()}  # PEFT's layer holds the base
        # DoRA's magnitude under the name PEFT's files give it (without its holder's ".weight").
        weights = {k[:-len(".weight")] if k.endswith(".lora_magnitude_vector.weight") else k: v
                   for k, v in weights.items()}
        # A module to save computes with its trained copy; its original stays as it was.
        weights = {k.replace(".modules_to_save.default.", "."): v for k, v in weights.items()
                   if ".original_module." not in k}
        if self.second:
            weights.update({"second." + k: v for k, v in self.accelerator.unwrap_model(self.second[0]).state_dict().items()})
        return {name: t.float().flatten().tolist() for name, t in weights.items()}

    def averages(self):
        return {name: t.float().flatten().tolist() for name, t in self.averaged.state_dict().items()}


class OurJob:
    """The same loop through the C API."""

    def __init__(self, cfg, directory):
        import acc_ctypes as api

        self.api, self.cfg = api, cfg
        self.lib = lib = api.load(os.environ.get("ACC_BUILD_DIR", "build"))
        accelerator_options = {"cpu": cfg["cpu"], "mixed_precision": cfg["mixed_precision"],
                               "gradient_accumulation_steps": cfg["accumulation"], "even_batches": cfg["even_batches"],
                               "split_batches": cfg["split_batches"], "sync_each_batch": cfg["sync_each_batch"],
                               "step_scheduler_with_optimizer": cfg["step_scheduler_with_optimizer"],
                               "sync_with_dataloader": cfg["sync_with_dataloader"]}
        if cfg["dispatch_batches"] is not None:
            accelerator_options["dispatch_batches"] = cfg["dispatch_batches"]
        if cfg["ddp_bucket_cap_mb"] is not None:
            accelerator_options["ddp_bucket_cap_mb"] = cfg["ddp_bucket_cap_mb"]
        if cfg["ddp_find_unused_parameters"]:
            accelerator_options["ddp_find_unused_parameters"] = True
        if cfg["ddp_static_graph"]:
            accelerator_options["ddp_static_graph"] = True
        if cfg["ddp_comm_hook"]:
            accelerator_options["ddp_comm_hook"] = cfg["ddp_comm_hook"]
        if cfg["ddp_comm_wrapper"]:
            accelerator_options["ddp_comm_wrapper"] = cfg["ddp_comm_wrapper"]
        if cfg["ddp_comm_state"]:
            accelerator_options["ddp_comm_state_option"] = json.dumps(cfg["ddp_comm_state"])
        if cfg["data_seed"] is not None and not cfg["loader_seed"]:
            accelerator_options.update(use_seedable_sampler=True, data_seed=cfg["data_seed"])
        if cfg["handover"]:
            accelerator_options["python_state_files"] = True
        if cfg["zero_stage"]:  # ours sharded, Accelerate's DDP: the stages train as DDP does
            accelerator_options["zero_stage"] = cfg["zero_stage"]
        if cfg["state_dict_type"]:
            accelerator_options["state_dict_type"] = cfg["state_dict_type"]
        self.acc = acc = lib.new("acc_accelerator_create", lib.options(api.ACC_OPTIONS_ACCELERATOR, accelerator_options))
        rank, size = ctypes.c_int64(), ctypes.c_int64()
        lib.acc_accelerator_process_index(acc, ctypes.byref(rank))
        lib.acc_accelerator_num_processes(acc, ctypes.byref(size))
        self.rank, self.processes = rank.value, size.value
        lib.acc_set_seed(ctypes.c_uint64(cfg["seed"]))
        model = lib.new("acc_model_load_torchscript", os.path.join(directory, cfg["model"] + ".pt").encode())
        if not cfg["graph_optimization"]:
            lib.acc_model_set_graph_optimization(model, 0)
        if cfg["freeze"]:
            lib.acc_model_set_requires_grad(model, cfg["freeze"].encode(), 0, None)
        if cfg["lora"] and cfg["lora"].get("method") == "TRAINABLE_TOKENS":
            settings = cfg["lora"]
            tokens = lib.options(api.ACC_OPTIONS_TRAINABLE_TOKENS,
                                 {"token_indices": json.dumps(settings["token_indices"]),
                                  "init_weights": settings.get("init_weights", True)})
            lib.acc_model_add_trainable_tokens(model, None, tokens, None)
            lib.lib.acc_options_free(tokens)
        elif cfg["lora"]:
            settings = cfg["lora"]
            lora = lib.options(api.ACC_OPTIONS_LORA, {"r": settings["r"], "lora_alpha": float(settings["alpha"]),
                                                      "lora_dropout": float(settings.get("dropout", 0.0)),
                                                      "modules_to_save": settings.get("modules_to_save", ""),
                                                      "bias": settings.get("bias", "none"),
                                                      "rank_pattern": json.dumps(settings.get("rank_pattern", {})),
                                                      "alpha_pattern": json.dumps(settings.get("alpha_pattern", {})),
                                                      "use_dora": settings.get("use_dora", False),
                                                      "lora_bias": settings.get("lora_bias", False),
                                                      "init_lora_weights": settings.get("init", "true"),
                                                      "trainable_token_indices":
                                                          json.dumps(settings["trainable_token_indices"])
                                                          if "trainable_token_indices" in settings else ""})
            lib.acc_model_add_lora(model, settings["targets"].encode(), lora, None)
            lib.lib.acc_options_free(lora)
        optimizer = lib.new("acc_optimizer_create", model, cfg["optimizer"].split("_")[0].encode(),
                            lib.options(api.ACC_OPTIONS_OPTIMIZER, optimizer_settings(cfg)))
        if cfg["no_decay"]:
            lib.acc_optimizer_add_param_group_matching(
                optimizer, cfg["no_decay"].encode(), lib.options(api.ACC_OPTIONS_OPTIMIZER, {"weight_decay": 0.0,
                                                              **({"lr": cfg["group_lr"]} if cfg["group_lr"] else {})}),
                None)
        data = torch.load(os.path.join(directory, "data.pt"))[cfg["data"]]
        if cfg["samples"]:
            data = [t[:cfg["samples"]] for t in data]
        settings = scheduler_settings(cfg, total_steps(cfg, len(data[0]), self.processes))
        settings = our_schedule_settings(settings)
        if cfg["group_factors"]:
            group_factors = cfg["group_factors"]

            def group_factor(_, group, step, out):
                out[0] = group_factors[group][step % len(group_factors[group])]
                return 0
            self.factor = api.GROUP_LR_LAMBDA(group_factor)  # kept alive as long as the scheduler
            create = {"lambda": "acc_scheduler_create_group_lambda",
                      "multiplicative": "acc_scheduler_create_group_multiplicative"}[cfg["schedule"]]
            scheduler = lib.new(create, optimizer, ctypes.c_size_t(len(group_factors)), self.factor, None, None)
        elif cfg["scale"]:
            scale = cfg["scale"]

            def scale_of(_, x, out):
                out[0] = scale[x % len(scale)]
                return 0
            self.factor = api.LR_LAMBDA(scale_of)
            scheduler = lib.new("acc_scheduler_create_cyclic", optimizer, lib.options(api.ACC_OPTIONS_SCHEDULER, settings),
                                self.factor, None, None)
        elif cfg["schedule"] == "multiplicative":
            factors = cfg["schedule_options"]["factors"]

            def factor(_, step, out):
                out[0] = factors[step % len(factors)]
                return 0
            self.factor = api.LR_LAMBDA(factor)  # kept alive as long as the scheduler
            scheduler = lib.new("acc_scheduler_create_multiplicative", optimizer, self.factor, None, None)
        else:
            scheduler = lib.new("acc_scheduler_create", optimizer, cfg["schedule"].encode(),
                                lib.options(api.ACC_OPTIONS_SCHEDULER, settings))
        for name, options in cfg["chain"]:
            lib.acc_scheduler_chain(scheduler, name.encode(),
                                    lib.options(api.ACC_OPTIONS_SCHEDULER, our_schedule_settings(options)))
        for milestone, name, options in cfg["then"]:
            lib.acc_scheduler_then(scheduler, ctypes.c_int64(milestone), name.encode(),
                                   lib.options(api.ACC_OPTIONS_SCHEDULER, our_schedule_settings(options)))
        loader_options = {"batch_size": cfg["batch_size"], "shuffle": True, "drop_last": cfg["drop_last"],
                          "num_workers": cfg["num_workers"]}
        if cfg["loader_generator"] is not None:
            loader_options["generator_seed"] = cfg["loader_generator"]
        if cfg["loader_seed"]:
            loader_options["seed"] = cfg["data_seed"]
        self.streams = []  # callbacks kept alive
        if cfg["stream"]:
            del loader_options["shuffle"]
            loader = self.stream_over(data, cfg["stream_shuffle"], loader_options, noisy=cfg["augment"])
        elif cfg["batch_sampler"]:
            loader = self.loader_from_batches(data, cfg["batch_sampler"])
        elif cfg["augment"]:
            loader = self.noisy_loader_over(data, loader_options)
        else:
            loader = self.loader_over(data, loader_options)
        lib.acc_prepare(acc, ctypes.byref(model), ctypes.byref(optimizer), ctypes.byref(loader),
                        ctypes.byref(scheduler))
        eval_data = [t[:cfg["eval_samples"]] for t in data]
        if cfg["eval_stream"]:
            evaluation = self.stream_over(eval_data, None, {"batch_size": cfg["batch_size"]})
        else:
            evaluation = self.loader_over(eval_data, {"batch_size": cfg["batch_size"]})
        lib.acc_prepare(acc, None, None, ctypes.byref(evaluation), None)
        self.second = None
        if cfg["second"]:
            model2 = lib.new("acc_model_load_torchscript", os.path.join(directory, "mlp.pt").encode())
            if not cfg["graph_optimization"]:  # Python's switch is global: every model runs unoptimised
                lib.acc_model_set_graph_optimization(model2, 0)
            opt2 = lib.new("acc_optimizer_create", model2, b"sgd",
                           lib.options(api.ACC_OPTIONS_OPTIMIZER, {"lr": 0.05, "momentum": 0.9}))
            sched2 = lib.new("acc_scheduler_create", opt2, b"step",
                             lib.options(api.ACC_OPTIONS_SCHEDULER, {"step_size": 3, "gamma": 0.5}))
            lib.acc_prepare(acc, ctypes.byref(model2), ctypes.byref(opt2), None, ctypes.byref(sched2))
            self.second = (model2, opt2, sched2)
        self.model, self.optimizer, self.loader, self.scheduler, self.evaluation = (
            model, optimizer, loader, scheduler, evaluation)
        self.in_local_sgd = False
        self.averaged = None
        if cfg["averaged"] is not None:
            self.averaged = lib.new("acc_averaged_model_create", model,
                                    lib.options(api.ACC_OPTIONS_AVERAGED_MODEL, cfg["averaged"]))
            lib.acc_register_averaged_model(acc, self.averaged)

    def loader_epoch(self):
        epoch = ctypes.c_int64()
        self.lib.acc_dataloader_epoch(self.loader, ctypes.byref(epoch))
        return epoch.value

    def loader_over(self, tensors, options):
        lib, p = self.lib, ctypes.c_void_p
        fields = [lib.tensor(t) for t in tensors]
        dataset = lib.new("acc_dataset_from_tensors", (p * len(fields))(*fields), ctypes.c_size_t(len(fields)))
        return lib.new("acc_dataloader_create", dataset, lib.options(self.api.ACC_OPTIONS_DATALOADER, options))

    def noisy_loader_over(self, tensors, options):
        """Noisy's samples from a callback: the noise drawn with acc_tensor_rand (on the loader's
        worker thread, if it has workers), added as Noisy adds it."""
        lib, api = self.lib, self.api

        def sample(_, index, out):
            x, *rest = (t[index] for t in tensors)
            noise = lib.new("acc_tensor_rand", (ctypes.c_int64 * x.dim())(*x.shape), ctypes.c_size_t(x.dim()))
            try:
                x = x + lib.to_torch(noise)
            finally:
                lib.lib.acc_tensor_free(noise)
            fields = lib.new("acc_tensor_list_create")
            for t in (x, *rest):
                h = lib.tensor(t)
                lib.acc_tensor_list_append(fields, None, h)
                lib.lib.acc_tensor_free(h)
            out[0] = fields
            return 0
        callback = api.SAMPLE_FN(sample)
        self.streams.append(callback)
        dataset = lib.new("acc_dataset_from_callback", ctypes.c_int64(len(tensors[0])), callback, None, None)
        return lib.new("acc_dataloader_create", dataset, lib.options(api.ACC_OPTIONS_DATALOADER, options))

    def stream_over(self, tensors, shuffle, options, noisy=False):
        """acc_dataset_from_iterator over `tensors`, in stream_order at each epoch's start (noisy: the
        features plus noise drawn with acc_tensor_rand as each sample is read, as Stream's)."""
        lib, api = self.lib, self.api
        state = {"order": [], "at": 0}

        def start(_, epoch):
            state["order"], state["at"] = stream_order(len(tensors[0]), shuffle, epoch), 0
            return 0

        def next_sample(_, out):
            if state["at"] >= len(state["order"]):
                out[0] = None
                return 0
            i = state["order"][state["at"]]
            state["at"] += 1
            sample = lib.new("acc_tensor_list_create")
            fields = [t[i] for t in tensors]
            if noisy:
                shape = fields[0].shape
                noise = lib.new("acc_tensor_rand", (ctypes.c_int64 * len(shape))(*shape), ctypes.c_size_t(len(shape)))
                try:
                    fields[0] = fields[0] + lib.to_torch(noise)
                finally:
                    lib.lib.acc_tensor_free(noise)
            for t in fields:
                h = lib.tensor(t)
                lib.acc_tensor_list_append(sample, None, h)
                lib.lib.acc_tensor_free(h)
            out[0] = sample
            return 0
        callbacks = (api.NEXT_FN(next_sample), api.START_FN(start))
        self.streams.append(callbacks)
        size = len(tensors[0]) if self.cfg["stream_len"] else -1
        dataset = lib.new("acc_dataset_from_iterator", callbacks[0], callbacks[1], None, None, ctypes.c_int64(size))
        return lib.new("acc_dataloader_create", dataset, lib.options(api.ACC_OPTIONS_DATALOADER, options))

    def loader_from_batches(self, tensors, batches):
        lib, p = self.lib, ctypes.c_void_p
        fields = [lib.tensor(t) for t in tensors]
        dataset = lib.new("acc_dataset_from_tensors", (p * len(fields))(*fields), ctypes.c_size_t(len(fields)))
        flat = [i for b in batches for i in b]
        return lib.new("acc_dataloader_create_from_batches", dataset, (ctypes.c_int64 * len(flat))(*flat),
                       (ctypes.c_size_t * len(batches))(*map(len, batches)), ctypes.c_size_t(len(batches)), None)

    def batches(self, loader):
        while True:
            batch = ctypes.c_void_p()
            self.lib.acc_dataloader_next(loader, ctypes.byref(batch))
            if not batch:
                return
            yield batch

    def forward(self, inputs, flags=0, model=None):
        lib = self.lib
        outputs = lib.new("acc_model_forward", model or self.model, (ctypes.c_void_p * 1)(inputs), ctypes.c_size_t(1),
                          ctypes.c_uint32(flags))
        logits = lib.list_get(outputs, 0)
        lib.lib.acc_tensor_list_free(outputs)
        return logits

    def loader_length(self):
        length = ctypes.c_int64()
        self.lib.acc_dataloader_length(self.loader, ctypes.byref(length))
        return length.value

    def train_epoch(self, epoch, record, skip=0, stop=None, leave=False):
        """The same. A loader resumed by load_state starts after the batches it had done itself;
        skip_first_batches with that number, as the Accelerate code does, changes nothing. A loop
        left (`leave`) ends the loader's epoch, as dropping Python's iterator does."""
        self.train_batches(epoch, record, skip, stop)
        if leave:
            self.lib.acc_dataloader_end_epoch(self.loader)

    def train_batches(self, epoch, record, skip, stop):
        lib, api, acc = self.lib, self.api, self.acc
        if self.cfg["takeover"] and self.cfg["data_seed"] is not None and self.loader_epoch() != epoch:
            # A run taken over from Python's folder, which holds no loader position: its loop sets the
            # seedable sampler's epoch, as the Python code does. (A checkpoint of ours resumes the
            # loader where it stood: after an epoch's end, at the next one, which a loop skipping the
            # saved epoch's rest then reaches.)
            lib.acc_dataloader_set_epoch(self.loader, ctypes.c_int64(epoch))
        if skip:
            lib.acc_dataloader_skip_first_batches(self.loader, ctypes.c_int64(skip))
        for done, batch in enumerate(self.batches(self.loader), start=skip + 1):
            lib.acc_accumulate_begin(acc)
            inputs, targets = lib.list_get(batch, 0), lib.list_get(batch, 1)
            if self.cfg["reference_forward"]:
                lib.acc_model_set_lora_enabled(self.model, ctypes.c_int(0))
                reference = self.forward(inputs, flags=1)  # ACC_FORWARD_NO_GRAD
                lib.acc_model_set_lora_enabled(self.model, ctypes.c_int(1))
                record.setdefault("reference", []).append(lib.to_torch(reference).double().sum().item())
                lib.lib.acc_tensor_free(reference)
            logits = self.forward(inputs)
            width = lib.to_torch(logits).shape[-1]
            flat_logits = lib.new("acc_tensor_reshape", logits, (ctypes.c_int64 * 2)(-1, width), ctypes.c_size_t(2))
            flat_targets = lib.new("acc_tensor_reshape", targets, (ctypes.c_int64 * 1)(-1), ctypes.c_size_t(1))
            loss = lib.new("acc_loss_cross_entropy", flat_logits, flat_targets, api.REDUCTION_MEAN,
                           ctypes.c_double(self.cfg["label_smoothing"]))
            if self.second:
                logits2 = lib.new("acc_model_forward", self.second[0], (ctypes.c_void_p * 1)(inputs), ctypes.c_size_t(1),
                                  ctypes.c_uint32(0))
                l2 = lib.list_get(logits2, 0)
                loss2 = lib.new("acc_loss_cross_entropy", l2, targets, api.REDUCTION_MEAN, ctypes.c_double(0.0))
            lib.acc_backward(acc, loss)
            if self.second:
                lib.acc_backward(acc, loss2)
                record.setdefault("loss2", []).append(lib.item(loss2))
            sync = ctypes.c_int()
            lib.acc_accelerator_sync_gradients(acc, ctypes.byref(sync))
            if self.second and sync.value and self.cfg["clip"] > 0:
                norm2 = ctypes.c_double()
                lib.acc_clip_grad_norm(acc, self.second[0], ctypes.c_double(self.cfg["clip"]), ctypes.c_double(2.0),
                                       ctypes.byref(norm2))
                record.setdefault("norm2", []).append(norm2.value)
            if sync.value and self.cfg["clip"] > 0:
                norm = ctypes.c_double()
                lib.acc_clip_grad_norm(acc, self.model, ctypes.c_double(self.cfg["clip"]),
                                       ctypes.c_double(self.cfg["clip_norm_type"]), ctypes.byref(norm))
                record["norm"].append(norm.value)
            if sync.value and self.cfg["clip_value"]:
                lib.acc_clip_grad_value(acc, self.model, ctypes.c_double(self.cfg["clip_value"]))
            lib.acc_optimizer_step(self.optimizer)
            if self.cfg["schedule"] == "reduce_lr_on_plateau":
                lib.acc_scheduler_step_metric(self.scheduler, ctypes.c_double(lib.item(loss)))
            else:
                lib.acc_scheduler_step(self.scheduler)
            lib.acc_optimizer_zero_grad(self.optimizer)
            if self.second:
                lib.acc_optimizer_step(self.second[1])
                lib.acc_scheduler_step(self.second[2])
                lib.acc_optimizer_zero_grad(self.second[1])
                lr2 = ctypes.c_double()
                lib.acc_scheduler_get_last_lr(self.second[2], ctypes.c_size_t(0), ctypes.byref(lr2))
                record.setdefault("lr2", []).append(lr2.value)
            if self.averaged is not None and sync.value:
                lib.acc_averaged_model_update(self.averaged, self.model)
            if self.in_local_sgd:
                lib.acc_local_sgd_step(acc, self.model)
            lib.acc_accumulate_end(acc)
            record["loss"].append(lib.item(loss))
            lr = ctypes.c_double()
            lib.acc_scheduler_get_last_lr(self.scheduler, ctypes.c_size_t(0), ctypes.byref(lr))
            record["lr"].append(lr.value)
            if self.cfg["group_lr"]:
                lib.acc_scheduler_get_last_lr(self.scheduler, ctypes.c_size_t(1), ctypes.byref(lr))
                record.setdefault("lr1", []).append(lr.value)
            for t in (inputs, targets, logits, flat_logits, flat_targets, loss):
                lib.lib.acc_tensor_free(t)
            lib.lib.acc_tensor_list_free(batch)
            if done == stop:
                break

    def local_sgd_begin(self):
        self.lib.acc_local_sgd_begin(self.acc, self.model, ctypes.c_int64(self.cfg["local_sgd"]), ctypes.c_int(1))
        self.in_local_sgd = True

    def local_sgd_end(self):
        self.lib.acc_local_sgd_end(self.acc, self.model)
        self.in_local_sgd = False

    def evaluate(self, averaged=False, model=None):
        """With `averaged`, the averages swapped into the model for the evaluation, which computes
        through the unwrapped model: without autocast, as Python's AveragedModel (never prepared)."""
        lib = self.lib
        if averaged:
            lib.acc_averaged_model_swap(self.averaged, self.model)
            unwrapped = lib.new("acc_unwrap_model", self.acc, self.model)
            try:
                return self.evaluate(model=unwrapped)
            finally:
                lib.lib.acc_model_free(unwrapped)
                lib.acc_averaged_model_swap(self.averaged, self.model)
        lib.acc_model_set_training(self.model, 0)
        gathered = []
        for batch in self.batches(self.evaluation):
            inputs = lib.list_get(batch, 0)
            logits = self.forward(inputs, flags=1, model=model)  # ACC_FORWARD_NO_GRAD
            if self.cfg["eval_pad"]:
                padded = lib.new("acc_pad_across_processes", self.acc, logits, ctypes.c_int64(0), ctypes.c_double(-5),
                                 ctypes.c_int(0), b"pad")
                lib.lib.acc_tensor_free(logits)
                logits = padded
            everyone = lib.new("acc_gather_for_metrics", self.acc, logits, b"logits")
            gathered += lib.to_torch(everyone).flatten().tolist()
            for t in (inputs, logits, everyone):
                lib.lib.acc_tensor_free(t)
            lib.lib.acc_tensor_list_free(batch)
        lib.acc_model_set_training(self.model, 1)
        return gathered

    def ops(self):
        lib, out = self.lib, []
        back = {1: torch.float32, 2: torch.float64, 3: torch.bfloat16, 4: torch.float16, 5: torch.int64, 6: torch.int32}
        for name, kind, t, args in op_inputs(self.rank):
            h = lib.tensor(t)
            try:
                if kind == "gather":
                    res = lib.new("acc_gather", self.acc, h, name.encode())
                elif kind == "gather_for_metrics":
                    res = lib.new("acc_gather_for_metrics", self.acc, h, name.encode())
                elif kind == "pad":
                    res = lib.new("acc_pad_across_processes", self.acc, h, ctypes.c_int64(args["dim"]),
                                  ctypes.c_double(args["value"]), ctypes.c_int(int(args["first"])), name.encode())
                else:
                    res = lib.new("acc_reduce", self.acc, h, {"sum": 2, "mean": 1}[args["op"]], name.encode())
                dt = ctypes.c_int()
                lib.acc_tensor_dtype(res, ctypes.byref(dt))
                out.append([name] + describe(lib.to_torch(res, back[dt.value])))
            except self.api.Error as e:
                out.append([name, "error", str(e)])
        return out

    def save(self, checkpoint):
        self.lib.acc_save_state(self.acc, checkpoint.encode(), None)

    def save_model(self, directory):
        self.lib.acc_save_model(self.acc, self.model, directory.encode(), None)

    def load(self, checkpoint):
        self.lib.acc_load_state(self.acc, checkpoint.encode(), None)

    def weights(self):
        """Accelerate's get_state_dict (full weights under sharding too; every process calls it)."""
        state = self.lib.new("acc_get_state_dict", self.acc, self.model, 1)
        out = {name: self.lib.to_torch(t).flatten().tolist() for name, t in self.lib.list_items(state)}
        if self.second:
            state = self.lib.new("acc_get_state_dict", self.acc, self.second[0], 1)
            out.update({"second." + name: self.lib.to_torch(t).flatten().tolist() for name, t in self.lib.list_items(state)})
        return out

    def averages(self):
        state = self.lib.new("acc_averaged_model_state_dict", self.averaged)
        return {name: self.lib.to_torch(t).float().flatten().tolist() for name, t in self.lib.list_items(state)}


def op_inputs(rank):
    """(name, kind, tensor, arguments) of the collectives the ops scenario calls, for one rank."""
    r = rank
    return [
        ("gather_0d", "gather", torch.tensor(1.5 + r), {}),
        ("gather_int", "gather", torch.arange(6, dtype=torch.int64).reshape(2, 3) + 10 * r, {}),
        ("gather_empty", "gather", torch.zeros(0, 3), {}),
        ("gather_bf16", "gather", torch.full((3,), (r + 1) / 3).to(torch.bfloat16), {}),
        ("gather_1d_noncontig", "gather", (torch.arange(8.0) + r).reshape(4, 2).t(), {}),
        ("pad0", "pad", torch.full((r + 1, 2), float(r + 1)), dict(dim=0, value=-1.0, first=False)),
        ("pad0_first", "pad", torch.full((r + 1, 2), float(r + 1)), dict(dim=0, value=-1.0, first=True)),
        ("pad1", "pad", torch.full((2, 1 + 2 * r), float(r + 1)), dict(dim=1, value=0.5, first=False)),
        ("pad_neg", "pad", torch.full((2, 1 + 2 * r), float(r + 1)), dict(dim=-1, value=9.0, first=True)),
        ("pad_int", "pad", torch.arange(2 + r, dtype=torch.int64), dict(dim=0, value=7, first=False)),
        ("pad_same", "pad", torch.ones(3, 2), dict(dim=0, value=-2.0, first=False)),
        ("pad_rev", "pad", torch.full((3 - r if r < 3 else 1, 2), float(r)), dict(dim=0, value=-1.0, first=False)),
        ("reduce_sum", "reduce", torch.tensor([r + 0.1, r * 2.5, -r / 3.0]), dict(op="sum")),
        ("reduce_mean", "reduce", torch.tensor([r + 0.1, r * 2.5, -r / 3.0]), dict(op="mean")),
        ("reduce_mean_3", "reduce", torch.tensor([0.1 * (r + 1), 0.7, 1.0 / 3.0]), dict(op="mean")),
        ("reduce_sum_int", "reduce", torch.tensor([r + 1, 5 * r], dtype=torch.int64), dict(op="sum")),
        ("reduce_mean_bf16", "reduce", torch.tensor([r + 0.3, 1.7]).to(torch.bfloat16), dict(op="mean")),
        ("reduce_sum_0d", "reduce", torch.tensor(2.0 + r), dict(op="sum")),
        ("gather_for_metrics_free", "gather_for_metrics", torch.tensor([1.0 + r, 2.0]), {}),
    ]


def describe(t):
    return [str(t.dtype).replace("torch.", ""), list(t.shape), t.float().flatten().tolist()]


def run(side, cfg, directory):
    """The scenario's epochs, then an evaluation gathered over the processes. With `resume`, the
    state is saved before the last epoch (or after `resume_at` batches of the first), every object
    made anew and the state loaded, and training goes on from there."""
    job_class = AccelerateJob if side == "accelerate" else OurJob
    # A handover's Accelerate side: ours trains up to the save, Accelerate loads it and goes on; a
    # takeover's our side: Accelerate trains up to its save, ours loads it and goes on.
    first_class = OurJob if cfg["handover"] else AccelerateJob if cfg["takeover"] else job_class
    job = first_class(cfg, directory)
    record = {"loss": [], "lr": [], "norm": []}
    if cfg["ops"]:
        record["ops"] = job.ops()
        return record, job.rank, job.processes
    resume_epoch = cfg["epochs"] - 1 if cfg["resume_at"] is None else 0
    if cfg["local_sgd"]:
        job.local_sgd_begin()
    for epoch in range(cfg["epochs"]):
        skip = (cfg["skip"] or {}).get(epoch, 0)
        dispatching = cfg["dispatch_batches"] if cfg["dispatch_batches"] is not None else cfg["stream"]
        if side == "accelerate" and dispatching and not cfg["stream"] and not cfg["split_batches"]:
            skip *= job.processes  # Accelerate's dispatcher skips base batches (README), one per process
        if cfg["resume"] and epoch == resume_epoch:
            if cfg["resume_at"] is not None:
                job.train_epoch(epoch, record, stop=cfg["resume_at"])
                skip = cfg["resume_at"]
            # One folder per scenario: Accelerate keeps what a folder held (another scenario's custom_checkpoint_0).
            checkpoint = os.path.join(directory, f"checkpoint.{cfg['name']}.{side}.{job.processes}")
            job.save(checkpoint)
            job = job_class(cfg, directory)
            job.load(checkpoint)
        if cfg["leave_before_end"]:
            job.train_epoch(epoch, record, skip=skip, stop=job.loader_length() - cfg["leave_before_end"], leave=True)
        else:
            job.train_epoch(epoch, record, skip=skip)
    if cfg["local_sgd"]:
        job.local_sgd_end()
    record["eval"] = job.evaluate()
    record["weights"] = job.weights()
    if cfg["averaged"] is not None:
        record["eval_averaged"] = job.evaluate(averaged=True)
        record["averages"] = job.averages()
    job.save_model(os.path.join(directory, f"{cfg['name']}.{side}.{job.processes}.model"))
    return record, job.rank, job.processes


def differences(a, o):
    """The first difference between two runs of one process (None when bit-identical), and the largest."""
    first, worst = None, 0.0
    for key in ("loss", "loss2", "lr", "lr1", "lr2", "norm", "norm2", "reference", "eval", "eval_averaged", "ops"):
        if key not in a and key not in o:
            continue
        if len(a.get(key, [])) != len(o.get(key, [])):
            first = first or f"{len(a[key])} {key} values from Accelerate, {len(o[key])} from ours"
            worst = math.inf
            continue
        for step, (x, y) in enumerate(zip(a[key], o[key])):
            if x != y:
                first = first or f"{key} at step {step}: {x!r} vs {y!r}"
                worst = max(worst, abs(x - y) if isinstance(x, float) and isinstance(y, float) else math.inf)
    for field in ("weights", "averages"):
        theirs, ours = a.get(field, {}), o.get(field, {})
        if set(theirs) != set(ours):
            first = first or f"{field} named differently: {sorted(set(theirs) ^ set(ours))}"
            worst = math.inf
        for key in sorted(set(theirs) & set(ours)):
            d = max((abs(x - y) for x, y in zip(theirs[key], ours[key])), default=0.0)
            if d > 0:
                first = first or f"{field} {key} differs by {d}"
                worst = max(worst, d)
    return first, worst


def accelerate_own_resume(name, processes):
    """The scenario Accelerate's side of a handover (or our takeover) is held to where Accelerate's
    own resume is not its uninterrupted run: `accelerate_resume`, or on several processes
    `resume_on_several`; None: the uninterrupted run."""
    scenario = SCENARIOS[name]
    if processes > 1 and scenario.get("resume_on_several"):
        return scenario["resume_on_several"]
    return scenario.get("accelerate_resume")


def compare(name, directory, processes):
    def load(scenario, side, rank):
        with open(os.path.join(directory, f"{scenario}.{side}.{processes}.{rank}.json")) as f:
            return json.load(f)

    # A resumed run is held to Accelerate's uninterrupted one: Accelerate's own resume on several
    # processes draws a new shuffle (its sampler's generator is not saved, accelerate#3242). A run
    # taken over from Accelerate's checkpoint, which lacks that generator too, is held to Accelerate
    # resuming it (`accelerate_resume`), where the scenario names that run.
    reference = SCENARIOS[name].get("uninterrupted", name)
    own_resume = accelerate_own_resume(name, processes)
    if SCENARIOS[name].get("takeover") and own_resume:
        reference = own_resume
    verdict, ok = "bit-identical", True
    for rank in range(processes):
        ours, theirs = load(name, "ours", rank), load(reference, "accelerate", rank)
        if SCENARIOS[name].get("accelerate_keeps_padding") and len(theirs["eval"]) > len(ours["eval"]):
            theirs["eval"] = theirs["eval"][:len(ours["eval"])]
            verdict = "bit-identical (Accelerate's evaluation also keeps the padding)"
        first, worst = differences(theirs, ours)
        if first:
            print(f"{name} rank {rank}: first difference: {first}")
            verdict, ok = "DIFFERS (largest difference %.3g)" % worst, False
        elif SCENARIOS[name].get("handover"):
            held_to = load(own_resume, "accelerate", rank) if own_resume else theirs
            handed, _ = differences(held_to, load(name, "accelerate", rank))
            if handed:
                print(f"{name} rank {rank}: handed over to Accelerate: first difference: {handed}")
                verdict, ok = "DIFFERS (handed over to Accelerate)", False
            else:
                verdict = ("bit-identical; Accelerate resuming our checkpoint runs as "
                           + ("it does from its own" if own_resume else "its uninterrupted run"))
        elif reference != name and differences(load(name, "accelerate", rank), ours)[0]:
            verdict = f"bit-identical to Accelerate's uninterrupted run (its own resume differs)"
    saved = None if SCENARIOS[name].get("ops") else saved_models_differ(reference, name, directory, processes)
    if saved:
        print(f"{name}: save_model: {saved}")
        verdict, ok = "DIFFERS (save_model)", False
    print(f"{name:24s} {processes} process(es), {len(ours['loss'])} steps: {verdict}")
    return ok


def saved_models_differ(theirs_name, ours_name, directory, processes):
    """What differs between the model.safetensors files save_model wrote, read by Python's
    safetensors, then byte by byte (None when they are the same file)."""
    from safetensors.torch import load_file

    files = [os.path.join(directory, f"{scenario}.{side}.{processes}.model", "model.safetensors")
             for scenario, side in ((theirs_name, "accelerate"), (ours_name, "ours"))]
    if not all(os.path.exists(f) for f in files):
        return "missing: " + ", ".join(f for f in files if not os.path.exists(f))
    theirs, ours = (load_file(f) for f in files)
    if theirs.keys() != ours.keys():
        return f"tensors named differently: {sorted(theirs.keys() ^ ours.keys())}"
    for key in theirs:
        if theirs[key].dtype != ours[key].dtype or not torch.equal(theirs[key], ours[key]):
            return f"tensor {key} differs"
    with open(files[0], "rb") as a, open(files[1], "rb") as b:
        if a.read() != b.read():  # the same tensors: the layout (order, offsets, header) differs
            return "the same tensors, laid out otherwise than safetensors' own writer does"
    return None


def main(argv):
    if argv[1] == "export":
        export(argv[2])
    elif argv[1] == "list":  # the names given (all when none), each after the run it is held to
        on_gpu = os.environ.get("ACC_SIDE_BY_SIDE_DEVICE", "cpu") != "cpu"
        names = argv[2:] or [name for name, s in SCENARIOS.items() if on_gpu or not s.get("gpu_only")]
        ordered = []
        for name in names:
            scenario = SCENARIOS[name]
            for needed in (scenario.get("uninterrupted"), scenario.get("accelerate_resume"),
                           scenario.get("resume_on_several"), name):
                if needed and needed not in ordered:
                    ordered.append(needed)
        print(" ".join(ordered))
    elif argv[1] == "applies":  # whether scenario argv[2] runs on argv[3] processes (exit status)
        counts = SCENARIOS[argv[2]].get("processes")
        return 0 if counts is None or int(argv[3]) in counts else 1
    elif argv[1] == "run":
        side, name, directory = argv[2], argv[3], argv[4]
        record, rank, processes = run(side, config(name), directory)
        with open(os.path.join(directory, f"{name}.{side}.{processes}.{rank}.json"), "w") as f:
            json.dump(record, f)
        # As Accelerate's end_training. Even so, torch 2.6's teardown of its Gloo group at the
        # interpreter's exit aborts now and then ("terminate called without an active exception",
        # pytorch#190489: 2 of ~150 two-process runs of Accelerate's side, with our library loaded
        # or not): the record is written, so the process ends here, without that teardown.
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    elif argv[1] == "compare":
        return 0 if compare(argv[2], argv[3], int(argv[4])) else 1
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main(sys.argv))
