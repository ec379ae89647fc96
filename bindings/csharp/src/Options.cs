// Options with typed Put overloads that chain: Options.Accelerator().Put("cpu", true).
namespace Accelerate {

public partial class Options {
  public static Options Accelerator() { return new Options(OptionsKind.AcceleratorOptions); }
  public static Options Optimizer() { return new Options(OptionsKind.OptimizerOptions); }
  public static Options Scheduler() { return new Options(OptionsKind.SchedulerOptions); }
  public static Options DataLoader() { return new Options(OptionsKind.DataLoaderOptions); }
  /// <summary>Options of Model.AddLora (r, lora_alpha, use_rslora, use_dora, rank_pattern, ...: the keys of ACC_OPTIONS_LORA).</summary>
  public static Options Lora() { return new Options(OptionsKind.LoraOptions); }
  /// <summary>Options of Accelerator.Profile (Accelerate's ProfileKwargs: activities, schedule_*,
  /// record_shapes, profile_memory, with_flops, output_trace_dir, ...).</summary>
  public static Options Profile() { return new Options(OptionsKind.ProfileOptions); }
  /// <summary>Options of new AveragedModel (PyTorch's AveragedModel: strategy "swa" or "ema", decay,
  /// use_buffers, device).</summary>
  public static Options AveragedModel() { return new Options(OptionsKind.AveragedModelOptions); }
  /// <summary>Options of Model.AddTrainableTokens (PEFT's TrainableTokensConfig: token_indices,
  /// init_weights, ...).</summary>
  public static Options TrainableTokens() { return new Options(OptionsKind.TrainableTokensOptions); }
  /// <summary>Options of Model.AddWeightedAdapter (PEFT's add_weighted_adapter keywords: density,
  /// majority_sign_method, svd_rank, svd_clamp, svd_full_matrices, svd_driver).</summary>
  public static Options WeightedAdapter() { return new Options(OptionsKind.WeightedAdapterOptions); }
  /// <summary>Options of Model.InitializeLoraEva (how EVA reads the batches: inputs, labels,
  /// attention_mask, gather_distributed_inputs, max_batches).</summary>
  public static Options Eva() { return new Options(OptionsKind.EvaOptions); }
  /// <summary>Options of Model.AddIa3 (PEFT's IA3Config: feedforward_modules, init_ia3_weights,
  /// exclude_modules, modules_to_save).</summary>
  public static Options Ia3() { return new Options(OptionsKind.Ia3Options); }
  /// <summary>Options of Model.AddLoha (PEFT's LoHaConfig: r, alpha, rank_dropout, module_dropout,
  /// use_effective_conv2d, init_weights, ...).</summary>
  public static Options Loha() { return new Options(OptionsKind.LohaOptions); }
  /// <summary>Options of Model.AddLokr (PEFT's LoKrConfig: r, alpha, rank_dropout, module_dropout,
  /// decompose_both, decompose_factor, init_weights, ...).</summary>
  public static Options Lokr() { return new Options(OptionsKind.LokrOptions); }
  /// <summary>Options of Model.AddVera (PEFT's VeraConfig: r, projection_prng_key, save_projection,
  /// vera_dropout, d_initial, init_weights, ...).</summary>
  public static Options Vera() { return new Options(OptionsKind.VeraOptions); }
  /// <summary>Options of Model.AddOft (PEFT's OFTConfig: r or oft_block_size, coft, block_share,
  /// use_cayley_neumann, init_weights, ...).</summary>
  public static Options Oft() { return new Options(OptionsKind.OftOptions); }
  /// <summary>Options of Model.AddAdalora (PEFT's AdaLoraConfig: total_step, required; init_r,
  /// target_r, tinit, tfinal, deltaT, orth_reg_weight, ...).</summary>
  public static Options Adalora() { return new Options(OptionsKind.AdaloraOptions); }
  /// <summary>Options of Model.AddBoft (PEFT's BOFTConfig: boft_block_size or boft_block_num,
  /// boft_n_butterfly_factor, boft_dropout, init_weights, ...).</summary>
  public static Options Boft() { return new Options(OptionsKind.BoftOptions); }
  /// <summary>Options of Model.AddHra (PEFT's HRAConfig: r, apply_GS, init_weights, bias, ...).</summary>
  public static Options Hra() { return new Options(OptionsKind.HraOptions); }
  /// <summary>Options of Model.AddFourierft (PEFT's FourierFTConfig: n_frequency, scaling,
  /// random_loc_seed, ...).</summary>
  public static Options Fourierft() { return new Options(OptionsKind.FourierftOptions); }
  /// <summary>Options of Model.AddLnTuning (PEFT's LNTuningConfig: exclude_modules, modules_to_save,
  /// ...).</summary>
  public static Options LnTuning() { return new Options(OptionsKind.LnTuningOptions); }
  /// <summary>Options of Model.AddMiss (PEFT's MissConfig: r, miss_dropout, mini_r, init_weights,
  /// ...).</summary>
  public static Options Miss() { return new Options(OptionsKind.MissOptions); }
  /// <summary>Options of Model.AddC3a (PEFT's C3AConfig: block_size, block_size_pattern,
  /// init_weights, ...).</summary>
  public static Options C3a() { return new Options(OptionsKind.C3aOptions); }
  /// <summary>Options of Model.AddShira (PEFT's ShiraConfig: r, mask_type, random_seed,
  /// init_weights, ...).</summary>
  public static Options Shira() { return new Options(OptionsKind.ShiraOptions); }
  /// <summary>Options of Model.AddRandlora (PEFT's RandLoraConfig: r, projection_prng_key,
  /// randlora_alpha, sparse, ...).</summary>
  public static Options Randlora() { return new Options(OptionsKind.RandloraOptions); }
  /// <summary>Options of Model.AddDelora (PEFT's DeloraConfig: r, delora_lambda, module_dropout,
  /// ...).</summary>
  public static Options Delora() { return new Options(OptionsKind.DeloraOptions); }
  /// <summary>Options of Model.AddRoad (PEFT's RoadConfig: variant, group_size,
  /// init_weights).</summary>
  public static Options Road() { return new Options(OptionsKind.RoadOptions); }
  /// <summary>Options of Model.AddGralora (PEFT's GraloraConfig: r, hybrid_r, alpha, gralora_k,
  /// ...).</summary>
  public static Options Gralora() { return new Options(OptionsKind.GraloraOptions); }
  /// <summary>Options of Model.AddHira (PEFT's HiraConfig: r, hira_dropout, init_weights,
  /// ...).</summary>
  public static Options Hira() { return new Options(OptionsKind.HiraOptions); }
  /// <summary>Options of Model.AddPvera (PEFT's PveraConfig: r, pvera_dropout, sample_at_inference,
  /// generator_seed, ...).</summary>
  public static Options Pvera() { return new Options(OptionsKind.PveraOptions); }

  public Options Put(string key, long value) { SetInt(key, value); return this; }
  public Options Put(string key, double value) { SetDouble(key, value); return this; }
  public Options Put(string key, bool value) { SetBool(key, value); return this; }
  public Options Put(string key, string value) { SetString(key, value); return this; }
}

}
