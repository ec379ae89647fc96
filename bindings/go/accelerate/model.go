package accelerate

import (
	"runtime"

	"github.com/accelerate-cpp/accelerate/go/internal/capi"
)

// OptionsKind says what an Options object configures.
type OptionsKind int

const (
	OptimizerOptions     OptionsKind = capi.OptionsOptimizer
	SchedulerOptions     OptionsKind = capi.OptionsScheduler
	DataLoaderOptions    OptionsKind = capi.OptionsDataLoader
	AcceleratorOptions   OptionsKind = capi.OptionsAccelerator
	LoraOptions          OptionsKind = capi.OptionsLora
	ProfileOptions       OptionsKind = capi.OptionsProfile       // Accelerate's ProfileKwargs (Accelerator.Profile)
	AveragedModelOptions OptionsKind = capi.OptionsAveragedModel // PyTorch's AveragedModel (NewAveragedModel)
	// PEFT's TrainableTokensConfig (Model.AddTrainableTokens: token_indices, init_weights, ...)
	TrainableTokensOptions OptionsKind = capi.OptionsTrainableTokens
	// PEFT's add_weighted_adapter keywords (Model.AddWeightedAdapterWith: density, svd_rank, ...)
	WeightedAdapterOptions OptionsKind = capi.OptionsWeightedAdapter
	// How Model.InitializeLoraEva reads the batches (inputs, labels, attention_mask, ...)
	EvaOptions OptionsKind = capi.OptionsEva
	// PEFT's IA3Config (Model.AddIa3: feedforward_modules, init_ia3_weights, ...)
	Ia3Options OptionsKind = capi.OptionsIa3
	// PEFT's LoHaConfig (Model.AddLoha: r, alpha, rank_dropout, module_dropout, ...)
	LohaOptions OptionsKind = capi.OptionsLoha
	// PEFT's LoKrConfig (Model.AddLokr: r, alpha, decompose_both, decompose_factor, ...)
	LokrOptions OptionsKind = capi.OptionsLokr
	// PEFT's VeraConfig (Model.AddVera: r, projection_prng_key, save_projection, ...)
	VeraOptions OptionsKind = capi.OptionsVera
	// PEFT's OFTConfig (Model.AddOft: r or oft_block_size, coft, block_share, ...)
	OftOptions OptionsKind = capi.OptionsOft
	// PEFT's AdaLoraConfig (Model.AddAdalora: total_step, required; init_r, target_r, tinit, ...)
	AdaloraOptions OptionsKind = capi.OptionsAdalora
	// PEFT's BOFTConfig (Model.AddBoft: boft_block_size or boft_block_num, boft_n_butterfly_factor, ...)
	BoftOptions OptionsKind = capi.OptionsBoft
	// PEFT's HRAConfig (Model.AddHra: r, apply_GS, init_weights, bias, ...)
	HraOptions OptionsKind = capi.OptionsHra
	// PEFT's FourierFTConfig (Model.AddFourierft: n_frequency, scaling, random_loc_seed, ...)
	FourierftOptions OptionsKind = capi.OptionsFourierft
	// PEFT's LNTuningConfig (Model.AddLnTuning: exclude_modules, modules_to_save, ...)
	LnTuningOptions OptionsKind = capi.OptionsLnTuning
	// PEFT's MissConfig (Model.AddMiss: r, miss_dropout, mini_r, init_weights, ...)
	MissOptions OptionsKind = capi.OptionsMiss
	// PEFT's C3AConfig (Model.AddC3a: block_size, block_size_pattern, init_weights, ...)
	C3aOptions OptionsKind = capi.OptionsC3a
	// PEFT's ShiraConfig (Model.AddShira: r, mask_type, random_seed, init_weights, ...)
	ShiraOptions OptionsKind = capi.OptionsShira
	// PEFT's RandLoraConfig (Model.AddRandlora: r, projection_prng_key, randlora_alpha, sparse, ...)
	RandloraOptions OptionsKind = capi.OptionsRandlora
	// PEFT's DeloraConfig (Model.AddDelora: r, delora_lambda, module_dropout, ...)
	DeloraOptions OptionsKind = capi.OptionsDelora
	// PEFT's RoadConfig (Model.AddRoad: variant, group_size, init_weights)
	RoadOptions OptionsKind = capi.OptionsRoad
	// PEFT's GraloraConfig (Model.AddGralora: r, hybrid_r, alpha, gralora_k, ...)
	GraloraOptions OptionsKind = capi.OptionsGralora
	// PEFT's HiraConfig (Model.AddHira: r, hira_dropout, init_weights, ...)
	HiraOptions OptionsKind = capi.OptionsHira
	// PEFT's PveraConfig (Model.AddPvera: r, pvera_dropout, sample_at_inference, generator_seed, ...)
	PveraOptions OptionsKind = capi.OptionsPvera
)

// Options are typed key/values (see accelerate.h for the keys of each kind).
type Options struct{ r ref[capi.Options] }

func NewOptions(kind OptionsKind) (*Options, error) {
	h, err := call(func(e *string) capi.Options { return capi.NewOptions(capi.Acc_options_kind(kind), e) })
	return adopt(h, err, capi.DeleteOptions, func(r ref[capi.Options]) *Options { return &Options{r} }, (*Options).Close)
}
func (o *Options) Close() error { return closeObject(o, o.ref()) }

func (o *Options) ref() *ref[capi.Options] {
	if o == nil {
		return nil
	}
	return &o.r
}

// handleOf is the handle to pass for an optional *Options (nil: NULL).
func (o *Options) handleOf() (capi.Options, error) {
	if o == nil {
		return capi.SwigcptrOptions(0), nil
	}
	return o.ref().get()
}

func (o *Options) SetInt(key string, v int64) error {
	return do(o.ref(), func(h capi.Options, e *string) { h.SetInt(key, v, e) })
}
func (o *Options) SetFloat(key string, v float64) error {
	return do(o.ref(), func(h capi.Options, e *string) { h.SetDouble(key, v, e) })
}
func (o *Options) SetBool(key string, v bool) error {
	return do(o.ref(), func(h capi.Options, e *string) { h.SetBool(key, v, e) })
}
func (o *Options) SetString(key, v string) error {
	return do(o.ref(), func(h capi.Options, e *string) { h.SetString(key, v, e) })
}

// Set sets any key from its text form ("4", "0.9", "true").
func (o *Options) Set(key, v string) error {
	return do(o.ref(), func(h capi.Options, e *string) { h.Set(key, v, e) })
}
func (o *Options) Get(key string) (string, error) {
	return with(o.ref(), func(h capi.Options, e *string) string { return h.Get(key, e) })
}

// Model is a trainable module (a TorchScript module or a layer spec), raw or prepared.
type Model struct{ r ref[capi.Model] }

func adoptModel(h capi.Model, err error) (*Model, error) {
	return adopt(h, err, capi.DeleteModel, func(r ref[capi.Model]) *Model { return &Model{r} }, (*Model).Close)
}
func (m *Model) Close() error { return closeObject(m, m.ref()) }

func (m *Model) ref() *ref[capi.Model] {
	if m == nil {
		return nil
	}
	return &m.r
}

// ModelFromSpec builds a sequential model from a JSON layer spec (see accelerate.h).
func ModelFromSpec(spec string) (*Model, error) {
	return adoptModel(call(func(e *string) capi.Model { return capi.ModelFromSpec(spec, e) }))
}
func LoadTorchScript(path string) (*Model, error) {
	return adoptModel(call(func(e *string) capi.Model { return capi.ModelLoadTorchscript(path, e) }))
}

func (m *Model) forward1(x *Tensor, flags uint) (*Tensor, error) {
	xh, err := x.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(x)
	return wrapTensor(with(m.ref(), func(h capi.Model, e *string) capi.Tensor { return h.Forward1(xh, flags, e) }))
}

// Forward runs the model on one input, recording autograd history.
func (m *Model) Forward(x *Tensor) (*Tensor, error) { return m.forward1(x, capi.ForwardDefault) }

// ForwardNoGrad runs the model without autograd history (evaluation).
func (m *Model) ForwardNoGrad(x *Tensor) (*Tensor, error) { return m.forward1(x, capi.ForwardNoGrad) }

// ForwardMany runs forward on several inputs; outputs are flattened into a list.
func (m *Model) ForwardMany(noGrad bool, inputs ...*Tensor) (*TensorList, error) {
	in, err := NewTensorList(inputs...)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	flags := uint(capi.ForwardDefault)
	if noGrad {
		flags = capi.ForwardNoGrad
	}
	return wrapTensorList(with(m.ref(), func(h capi.Model, e *string) capi.TensorList { return h.Forward(in.r.h, flags, e) }))
}

// ForwardAdapters is PEFT's forward with adapter_names (mixed batches, evaluation): sample i of the
// batch computes with the named adapter adapterNames[i] ("__base__": none), without autograd
// history; see acc_model_forward_adapters.
func (m *Model) ForwardAdapters(adapterNames []string, inputs ...*Tensor) (*TensorList, error) {
	encoded, err := nulJoined("ForwardAdapters: the adapter name", adapterNames)
	if err != nil {
		return nil, err
	}
	in, err := NewTensorList(inputs...)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return wrapTensorList(with(m.ref(), func(h capi.Model, e *string) capi.TensorList {
		return h.ForwardAdapters(in.r.h, encoded, capi.ForwardNoGrad, e)
	}))
}

func (m *Model) SetTraining(training bool) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.SetTraining(training, e) })
}
func (m *Model) IsTraining() bool {
	return value(m.ref(), func(h capi.Model, e *string) bool { return h.IsTraining(e) })
}

// SetGraphOptimization false runs a TorchScript model's forward eagerly, op by op, without the JIT's
// graph optimisation (true, the default), which gives PyTorch's eager numbers. Layer-spec models
// always run eagerly (accepted, no effect); a prepared model passes it to the model it wraps.
func (m *Model) SetGraphOptimization(enabled bool) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.SetGraphOptimization(enabled, e) })
}

// To moves the model to device ("" keeps it) and floating parameters to dtype (Undefined keeps it).
func (m *Model) To(device string, dtype DType) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.To(device, capi.Acc_dtype(dtype), e) })
}
func (m *Model) ParameterNames() ([]string, error) {
	return stringList(with(m.ref(), func(h capi.Model, e *string) capi.StringList { return h.ParameterNames(e) }))
}
func (m *Model) Parameter(name string) (*Tensor, error) {
	return wrapTensor(with(m.ref(), func(h capi.Model, e *string) capi.Tensor { return h.Parameter(name, e) }))
}
func (m *Model) ParameterCount() (tensors int64, elements int64, err error) {
	if tensors, err = with(m.ref(), func(h capi.Model, e *string) int64 { return h.ParameterTensorCount(e) }); err != nil {
		return 0, 0, err
	}
	elements, err = with(m.ref(), func(h capi.Model, e *string) int64 { return h.ParameterElementCount(e) })
	return tensors, elements, err
}
func (m *Model) ZeroGrad() error {
	return do(m.ref(), func(h capi.Model, e *string) { h.ZeroGrad(e) })
}

// SetRequiresGrad freezes (on false) or unfreezes the parameters whose names match patterns:
// comma-separated shell globs over whole names, '*' crossing dots ("0.*", "*.bias,encoder.*").
// It returns how many matched; none is ErrInvalidArgument. Call it before NewOptimizer and before
// preparing the model (a prepared model is refused).
func (m *Model) SetRequiresGrad(patterns string, on bool) (int, error) {
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.SetRequiresGrad(patterns, on, e) })
	return int(n), err
}

// AddLora adds LoRA adapters (PEFT's get_peft_model) to the linear layers (and a TorchScript
// model's convolutions) targetModules names:
// module names separated by commas, each matching a module named so or ending in "." and it
// ("q_proj,v_proj"), or "re:" and a regular expression over whole names. Every other parameter is
// frozen. opts: LoraOptions (r, lora_alpha, use_rslora, use_dora, rank_pattern, target_parameters, ...:
// the keys of ACC_OPTIONS_LORA) or nil; with target_parameters (a mixture of experts' expert weights)
// targetModules may be "". Call it before NewOptimizer and before preparing the model. It returns how
// many layers and parameters were adapted.
func (m *Model) AddLora(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddLora(targetModules, oh, e) })
	return int(n), err
}

// AddLoraCorda is PEFT's preprocess_corda and get_peft_model with init_lora_weights "corda": the
// model runs on one epoch of loader (the forward taking each batch's first inputs fields), and the
// targeted linear layers' adapters start from their weights' components along the inputs'
// covariance (corda_method "ipm": the largest, "kpm": the smallest), the weights keeping the
// residual (see acc_model_add_lora_corda). It returns how many layers were adapted.
func (m *Model) AddLoraCorda(targetModules string, opts *Options, loader *DataLoader, inputs int) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	lh, err := loader.ref().get()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(loader)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 {
		return h.AddLoraCorda(targetModules, oh, lh, int64(inputs), e)
	})
	return int(n), err
}

// BeginLoraGa is PEFT's preprocess_loraga, first half: the model trains with every parameter frozen
// but the targeted linear layers' weights, whose gradients the caller's own forward, loss and
// Backward calls then accumulate (no optimizer step); AddLoraGa adds the adapters from them (see
// acc_model_begin_lora_ga).
func (m *Model) BeginLoraGa(targetModules string, opts *Options) error {
	oh, err := opts.handleOf()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(opts)
	return do(m.ref(), func(h capi.Model, e *string) { h.BeginLoraGa(targetModules, oh, e) })
}

// AddLoraGa is PEFT's get_peft_model with init_lora_weights "lora_ga": the adapters start from the
// averaged gradients' singular vectors (lora_ga_direction, lora_ga_scale), the weights keeping the
// residual. It returns how many layers were adapted.
func (m *Model) AddLoraGa() (int, error) {
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddLoraGa(e) })
	return int(n), err
}

// Quantize is transformers' bitsandbytes quantisation: config is BitsAndBytesConfig as JSON with
// "load_in_4bit": true (as Quantize4bit) or "load_in_8bit": true (LLM.int8 layers, bitsandbytes'
// Linear8bitLt: int8 weights, frozen). Returns how many layers.
func (m *Model) Quantize(config string) (int, error) {
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.Quantize(config, e) })
	return int(n), err
}

// Quantize4bit is transformers' load_in_4bit (QLoRA's base model): the linear layers keep
// bitsandbytes' 4-bit weights, frozen, and compute as its Linear4bit. config is BitsAndBytesConfig
// as JSON (`{"load_in_4bit": true, "bnb_4bit_quant_type": "nf4"}`). Returns how many layers.
func (m *Model) Quantize4bit(config string) (int, error) {
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.Quantize4bit(config, e) })
	return int(n), err
}

// ReplaceLoraWeightsLoftq is PEFT's replace_lora_weights_loftq: the adapters of adapterName ("":
// the active one) on 4-bit layers restart from LoftQ's factors of each layer's quantisation error
// against the unquantised weights in modelPath (a model.safetensors or its folder). Every layer
// keeps its new adapters (the C API's keep callback is not taken). Returns how many layers.
func (m *Model) ReplaceLoraWeightsLoftq(modelPath, adapterName string) (int, error) {
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 {
		return h.ReplaceLoraWeightsLoftq(modelPath, adapterName, e)
	})
	return int(n), err
}

// PrepareForKbitTraining is PEFT's prepare_model_for_kbit_training: every parameter frozen and the
// float16/bfloat16 ones cast to float32 (the 4-bit and int8 codes stay). Returns how many were cast.
func (m *Model) PrepareForKbitTraining() (int, error) {
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.PrepareForKbitTraining(e) })
	return int(n), err
}

// AddTrainableTokens trains chosen rows of embeddings alone (PEFT's TrainableTokensConfig, new
// tokens without LoRA) and freezes every other parameter. targetModules: named as for AddLora, or ""
// for the model's input embedding; a head tied to it computes with the same rows. opts:
// TrainableTokensOptions with token_indices ("32000,32001"). SaveLora, LoadLora, MergeLora and
// WithoutLora act on them. It returns how many layers have trainable rows.
func (m *Model) AddTrainableTokens(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddTrainableTokens(targetModules, oh, e) })
	return int(n), err
}

// AddIa3 adds PEFT's IA3 adapters: each targeted layer trains a vector scaling its output, or for
// the feedforward_modules its input, and every other parameter is frozen. targetModules: named as
// for AddLora. opts: Ia3Options or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on them.
// It returns how many layers were adapted.
func (m *Model) AddIa3(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddIa3(targetModules, oh, e) })
	return int(n), err
}

// AddLoha adds PEFT's LoHa adapters: each targeted layer's weight trains as W + ((w1_a w1_b) *
// (w2_a w2_b)) * alpha / r, and every other parameter is frozen. targetModules: named as for AddLora.
// opts: LohaOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on them. It returns
// how many layers were adapted.
func (m *Model) AddLoha(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddLoha(targetModules, oh, e) })
	return int(n), err
}

// AddLokr adds PEFT's LoKr adapters: each targeted layer's weight trains as W + kron(w1, w2) * alpha
// / r, w1 and w2 whole or rank-r products, and every other parameter is frozen. targetModules: named
// as for AddLora. opts: LokrOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on
// them. It returns how many layers were adapted.
func (m *Model) AddLokr(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddLokr(targetModules, oh, e) })
	return int(n), err
}

// AddVera adds PEFT's VeRA adapters: frozen random projections shared by the targeted linear layers,
// each layer training two vectors (vera_lambda_b, vera_lambda_d); every other parameter is frozen.
// targetModules: named as for AddLora. opts: VeraOptions or nil. SaveLora, LoadLora, MergeLora and
// WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddVera(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddVera(targetModules, oh, e) })
	return int(n), err
}

// AddOft adds PEFT's OFT adapters on linear layers: each targeted layer's input is rotated block by
// block, the rotations trained (oft_R.weight); every other parameter is frozen. targetModules: named
// as for AddLora. opts: OftOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on them.
// It returns how many layers were adapted.
func (m *Model) AddOft(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddOft(targetModules, oh, e) })
	return int(n), err
}

// AddAdalora adds PEFT's AdaLoRA adapters: each targeted layer trains lora_A, lora_E and lora_B (an
// SVD-like delta whose ranks are pruned from init_r towards target_r), and every other parameter is
// frozen. targetModules: named as for AddLora. opts: AdaloraOptions (total_step is required). Train
// on AdaloraLoss's loss and call AdaloraUpdateAndAllocate after each step. SaveLora, LoadLora,
// MergeLora and WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddAdalora(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddAdalora(targetModules, oh, e) })
	return int(n), err
}

// AddBoft adds PEFT's BOFT adapters (butterfly orthogonal fine-tuning) on linear layers and 2-D
// convolutions: each targeted layer's input is rotated by boft_n_butterfly_factor butterfly factors of
// block rotations (boft_R) and its output scaled (boft_s), both trained; every other parameter is
// frozen. targetModules: named as for AddLora. opts: BoftOptions or nil. SaveLora, LoadLora, MergeLora
// and WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddBoft(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddBoft(targetModules, oh, e) })
	return int(n), err
}

// AddHra adds PEFT's HRA adapters (Householder reflection adaptation) on linear layers and 2-D
// convolutions: each targeted layer computes with its weight times r Householder reflections of
// hra_u's columns (trained); every other parameter is frozen. targetModules: named as for AddLora.
// opts: HraOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on them. It returns how
// many layers were adapted.
func (m *Model) AddHra(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddHra(targetModules, oh, e) })
	return int(n), err
}

// AddFourierft adds PEFT's FourierFT adapters on linear layers (transformers' Conv1D too): each
// targeted layer trains n_frequency entries of its delta's spectrum (fourierft_spectrum) at places
// drawn from random_loc_seed, the delta its inverse 2-D FFT; every other parameter is frozen.
// targetModules: named as for AddLora. opts: FourierftOptions or nil. SaveLora, LoadLora, MergeLora
// and WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddFourierft(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddFourierft(targetModules, oh, e) })
	return int(n), err
}

// AddMiss adds PEFT's MiSS adapters on linear layers: each targeted layer trains one shard
// (miss_block) shared by its input's r-wide blocks, in PEFT's variants (init_weights "true",
// "false", "bat", "mini"); every other parameter is frozen. targetModules: named as for AddLora.
// opts: MissOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on them. It returns
// how many layers were adapted.
func (m *Model) AddMiss(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddMiss(targetModules, oh, e) })
	return int(n), err
}

// AddC3a adds PEFT's C3A adapters on linear layers: each targeted layer trains a kernel
// (c3a_kernel) and adds its input convolved circularly, block by block, with it; every other
// parameter is frozen. targetModules: named as for AddLora. opts: C3aOptions or nil. SaveLora,
// LoadLora, MergeLora and WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddC3a(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddC3a(targetModules, oh, e) })
	return int(n), err
}

// AddShira adds PEFT's SHiRA adapters on linear layers: each targeted layer trains r (in + out)
// entries of its weight at places its own generator picks (shira_weight, shira_indices); every
// other parameter is frozen. targetModules: named as for AddLora. opts: ShiraOptions or nil.
// SaveLora, LoadLora, MergeLora and WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddShira(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddShira(targetModules, oh, e) })
	return int(n), err
}

// AddRandlora adds PEFT's RandLoRA adapters on linear layers: one pair of frozen random bases for
// all of them (randlora_A, randlora_B), scaled in each layer by its trained randlora_lambda and
// randlora_gamma; every other parameter is frozen. targetModules: named as for AddLora. opts:
// RandloraOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on them. It returns how
// many layers were adapted.
func (m *Model) AddRandlora(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddRandlora(targetModules, oh, e) })
	return int(n), err
}

// AddDelora adds PEFT's DeLoRA adapters on linear layers: each targeted layer trains delora_A,
// delora_B and delora_lambda, a normalised low-rank delta of trained strength scaled by the weight's
// column norms at the start (a frozen buffer); every other parameter is frozen. targetModules: named
// as for AddLora. opts: DeloraOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on
// them. It returns how many layers were adapted.
func (m *Model) AddDelora(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddDelora(targetModules, oh, e) })
	return int(n), err
}

// AddRoad adds PEFT's RoAd adapters on linear layers: each targeted layer trains road_theta and
// road_alpha, angles and scales that rotate its output pair by pair; every other parameter is frozen.
// targetModules: named as for AddLora. opts: RoadOptions or nil. SaveLora, LoadLora, MergeLora and
// WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddRoad(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddRoad(targetModules, oh, e) })
	return int(n), err
}

// AddGralora adds PEFT's GraLoRA adapters on linear layers (transformers' Conv1D too): each targeted
// layer trains gralora_A and gralora_B, its delta's k x k blocks each of rank r / k, and with hybrid_r
// a plain LoRA pair beside them; every other parameter is frozen. targetModules: named as for AddLora.
// opts: GraloraOptions or nil. SaveLora, LoadLora, MergeLora and WithoutLora act on them. It returns
// how many layers were adapted.
func (m *Model) AddGralora(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddGralora(targetModules, oh, e) })
	return int(n), err
}

// AddHira adds PEFT's HiRA adapters on linear layers (transformers' Conv1D too): each targeted layer
// trains hira_A and hira_B, its weight computing as W + W * (B A); every other parameter is frozen.
// targetModules: named as for AddLora. opts: HiraOptions or nil. SaveLora, LoadLora, MergeLora and
// WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddHira(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddHira(targetModules, oh, e) })
	return int(n), err
}

// AddPvera adds PEFT's PVeRA adapters on linear layers (transformers' Conv1D too): VeRA's shared
// frozen projections and two trained vectors per layer, the middle sampled in training from the mean
// and log-variance they give (its mean in evaluation); every other parameter is frozen.
// targetModules: named as for AddLora. opts: PveraOptions or nil. SaveLora, LoadLora, MergeLora and
// WithoutLora act on them. It returns how many layers were adapted.
func (m *Model) AddPvera(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddPvera(targetModules, oh, e) })
	return int(n), err
}

// AddLnTuning adds PEFT's LN tuning: the modules targetModules names (typically the layer norms)
// train themselves; every other parameter is frozen, and their values at the start are kept for a
// disabled forward and unload. opts: LnTuningOptions or nil. SaveLora, LoadLora, MergeLora and
// WithoutLora act on them. It returns how many modules are tuned.
func (m *Model) AddLnTuning(targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddLnTuning(targetModules, oh, e) })
	return int(n), err
}

// AdaloraLoss is AdaLoRA's training loss: loss plus orth_reg_weight times the adapters' orthogonal
// regularization, a new tensor with autograd history (call Backward on it instead of on loss).
func (m *Model) AdaloraLoss(loss *Tensor) (*Tensor, error) {
	lh, err := loss.ref().get()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(loss)
	return wrapTensor(with(m.ref(), func(h capi.Model, e *string) capi.Tensor { return h.AdaloraLoss(lh, e) }))
}

// AdaloraUpdateAndAllocate is PEFT's update_and_allocate(globalStep): once per step, after the
// backward and the optimizer step and before the gradients are zeroed, it updates the importances
// and prunes the ranks to the step's budget (see acc_model_adalora_update_and_allocate).
func (m *Model) AdaloraUpdateAndAllocate(globalStep int64) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.AdaloraUpdateAndAllocate(globalStep, e) })
}

// SaveLora writes PEFT's adapter_config.json and adapter_model.safetensors into dir.
func (m *Model) SaveLora(dir string) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.SaveLora(dir, e) })
}

// LoadLora reads PEFT's adapter files from dir, adding the adapters if the model has none; every
// check comes before anything changes.
func (m *Model) LoadLora(dir string) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.LoadLora(dir, e) })
}

// MergeLora merges the adapters into the weights and removes them (PEFT's merge_and_unload).
func (m *Model) MergeLora() error {
	return do(m.ref(), func(h capi.Model, e *string) { h.MergeLora(e) })
}

// LoraCount is the number of adapted layers (0 without adapters, or for a closed model).
func (m *Model) LoraCount() int {
	n, _ := with(m.ref(), func(h capi.Model, e *string) int64 { return h.LoraCount(e) })
	return int(n)
}

// SetLoraEnabled is PEFT's enable_adapter_layers (true) and disable_adapter_layers (false):
// disabled, the adapted layers compute as the base model's (see acc_model_set_lora_enabled).
func (m *Model) SetLoraEnabled(enabled bool) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.SetLoraEnabled(enabled, e) })
}

// AddLoraNamed is PEFT's add_adapter: a new adapter named adapterName, drawn as AddLora would draw
// it, kept aside (frozen, computing nothing) until SetAdapter makes it the active one; on a model
// without adapters it is the active one. Adapters made by AddLora and LoadLora are "default", and
// SaveLora writes each other adapter into dir/<name> (PEFT's save_pretrained). One adapter is
// active: the model's parameters, LoraCount, merging and checkpoints are its. Before NewOptimizer
// and preparing, as the other named-adapter calls (see acc_model_add_lora_named).
func (m *Model) AddLoraNamed(adapterName, targetModules string, opts *Options) (int, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.AddLoraNamed(adapterName, targetModules, oh, e) })
	return int(n), err
}

// LoadLoraNamed is PEFT's load_adapter: PEFT's files in dir, read as LoadLora into a model without
// adapters would, kept aside as adapterName.
func (m *Model) LoadLoraNamed(dir, adapterName string) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.LoadLoraNamed(dir, adapterName, e) })
}

// SetAdapter is PEFT's set_adapter: adapterName computes and trains from the next forward, with the
// values it had; the adapter it replaces is kept aside, frozen. It draws nothing.
func (m *Model) SetAdapter(adapterName string) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.SetAdapter(adapterName, e) })
}

// DeleteAdapter is PEFT's delete_adapter: the active one's place goes to the first of the others by
// name; deleting the last removes the adapters as UnloadLora.
func (m *Model) DeleteAdapter(adapterName string) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.DeleteAdapter(adapterName, e) })
}

// UnloadLora is PEFT's unload: every adapter removed without merging; the model computes as its base.
func (m *Model) UnloadLora() error {
	return do(m.ref(), func(h capi.Model, e *string) { h.UnloadLora(e) })
}

// AddWeightedAdapter is PEFT's add_weighted_adapter with svd_rank alone as keyword (0: the largest
// of the adapters' ranks); see AddWeightedAdapterWith.
func (m *Model) AddWeightedAdapter(adapters []string, weights []float64, adapterName, combinationType string,
	svdRank int64) (int, error) {
	opts, err := NewOptions(WeightedAdapterOptions)
	if err != nil {
		return 0, err
	}
	defer opts.Close()
	if err := opts.SetInt("svd_rank", svdRank); err != nil {
		return 0, err
	}
	return m.AddWeightedAdapterWith(adapters, weights, adapterName, combinationType, opts)
}

// AddWeightedAdapterWith is PEFT's add_weighted_adapter: a new adapter, kept aside, combining the
// named adapters with one weight each, combinationType "svd", "linear", "cat", "ties", "dare_linear",
// "dare_ties", "magnitude_prune" or a pruning one with "_svd"; opts (WeightedAdapterOptions, may be
// nil): density, majority_sign_method, svd_rank, svd_clamp, ...; see
// acc_model_add_weighted_adapter_with. It returns how many layers the new adapter adapts.
func (m *Model) AddWeightedAdapterWith(adapters []string, weights []float64, adapterName, combinationType string,
	opts *Options) (int, error) {
	encoded, err := nulJoined("AddWeightedAdapter: the adapter name", adapters)
	if err != nil {
		return 0, err
	}
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 {
		return h.AddWeightedAdapter(encoded, weights, adapterName, combinationType, oh, e)
	})
	return int(n), err
}

// InitializeLoraEva is PEFT's initialize_lora_eva_weights: adapters made with init_lora_weights
// "eva" take the principal components of their layers' inputs on the loader's batches, their ranks
// redistributed (see acc_model_initialize_lora_eva). opts (EvaOptions, may be nil) says how batches
// are read; acc (may be nil) gathers every process's inputs on several processes. Returns how many
// layers keep adapters.
func (m *Model) InitializeLoraEva(loader *DataLoader, opts *Options, acc *Accelerator) (int, error) {
	lh, err := loader.ref().get()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(loader)
	oh, err := opts.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(opts)
	ah := capi.Accelerator(capi.SwigcptrAccelerator(0))
	if acc != nil {
		if ah, err = acc.ref().get(); err != nil {
			return 0, err
		}
	}
	defer runtime.KeepAlive(acc)
	n, err := with(m.ref(), func(h capi.Model, e *string) int64 { return h.InitializeLoraEva(lh, oh, ah, e) })
	return int(n), err
}

// MergeLoraAdapters is PEFT's merge_and_unload(adapter_names=...): the named adapters merged into
// the weights in this order, then every adapter removed; see acc_model_merge_lora_adapters.
func (m *Model) MergeLoraAdapters(adapters []string) error {
	encoded, err := nulJoined("MergeLoraAdapters: the adapter name", adapters)
	if err != nil {
		return err
	}
	return do(m.ref(), func(h capi.Model, e *string) { h.MergeLoraAdapters(encoded, e) })
}

// ActiveAdapter is the active adapter's name (an error without adapters).
func (m *Model) ActiveAdapter() (string, error) {
	return with(m.ref(), func(h capi.Model, e *string) string { return h.ActiveAdapter(e) })
}

// AdapterNames lists every adapter's name, in the order they came.
func (m *Model) AdapterNames() ([]string, error) {
	return stringList(with(m.ref(), func(h capi.Model, e *string) capi.StringList { return h.AdapterNames(e) }))
}

// IsLoraEnabled says whether the model has LoRA adapters and they are enabled.
func (m *Model) IsLoraEnabled() bool {
	return value(m.ref(), func(h capi.Model, e *string) bool { return h.IsLoraEnabled(e) })
}

// WithoutLora runs f with the model's LoRA adapters disabled (PEFT's `with model.disable_adapter():`),
// e.g. for a reference model's outputs; they are enabled again when f returns (a panic included)
// unless they were disabled before. Returns f's error, else enabling's.
func (m *Model) WithoutLora(f func() error) (err error) {
	wasEnabled := m.IsLoraEnabled()
	if err := m.SetLoraEnabled(false); err != nil {
		return err
	}
	defer func() {
		if wasEnabled {
			if e := m.SetLoraEnabled(true); err == nil {
				err = e
			}
		}
	}()
	return f()
}

func (m *Model) StateDict() (*TensorList, error) {
	return wrapTensorList(with(m.ref(), func(h capi.Model, e *string) capi.TensorList { return h.StateDict(e) }))
}
func (m *Model) LoadStateDict(state *TensorList, strict bool) error {
	sh, err := state.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(state)
	return do(m.ref(), func(h capi.Model, e *string) { h.LoadStateDict(sh, strict, e) })
}
func (m *Model) SaveTorchScript(path string) error {
	return do(m.ref(), func(h capi.Model, e *string) { h.SaveTorchscript(path, e) })
}

// LoadSafetensors loads weights saved by SaveModel or save_pretrained; returns the names the
// model has but the file lacks, and the other way round.
func (m *Model) LoadSafetensors(path string, strict bool) (missing, unexpected []string, err error) {
	rep, err := with(m.ref(), func(h capi.Model, e *string) capi.LoadReport { return h.LoadSafetensors(path, strict, e) })
	if err != nil || rep.Swigcptr() == 0 {
		return nil, nil, err
	}
	defer capi.DeleteLoadReport(rep)
	for i := int64(0); i < rep.MissingCount(); i++ {
		name, err := call(func(e *string) string { return rep.Missing(i, e) })
		if err != nil {
			return nil, nil, err
		}
		missing = append(missing, name)
	}
	for i := int64(0); i < rep.UnexpectedCount(); i++ {
		name, err := call(func(e *string) string { return rep.Unexpected(i, e) })
		if err != nil {
			return nil, nil, err
		}
		unexpected = append(unexpected, name)
	}
	return missing, unexpected, nil
}

// Optimizer over a model's parameters: "sgd", "adam", "adamw", "rmsprop", "adagrad", "radam",
// "nadam", "adamax", "adadelta", "rprop", "asgd", "lion" or "adafactor" (accelerate.h documents
// each one's options).
type Optimizer struct{ r ref[capi.Optimizer] }

func adoptOptimizer(h capi.Optimizer, err error) (*Optimizer, error) {
	return adopt(h, err, capi.DeleteOptimizer, func(r ref[capi.Optimizer]) *Optimizer { return &Optimizer{r} }, (*Optimizer).Close)
}
func (o *Optimizer) Close() error { return closeObject(o, o.ref()) }

func (o *Optimizer) ref() *ref[capi.Optimizer] {
	if o == nil {
		return nil
	}
	return &o.r
}

// NewOptimizer; opts may be nil (PyTorch's defaults).
func NewOptimizer(model *Model, algorithm string, opts *Options) (*Optimizer, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(opts)
	return adoptOptimizer(with(model.ref(), func(h capi.Model, e *string) capi.Optimizer {
		return capi.NewOptimizer(h, algorithm, oh, e)
	}))
}
func (o *Optimizer) Step() error {
	return do(o.ref(), func(h capi.Optimizer, e *string) { h.Step(e) })
}
func (o *Optimizer) ZeroGrad() error {
	return do(o.ref(), func(h capi.Optimizer, e *string) { h.ZeroGrad(e) })
}

// SetTraining(true) is a schedule-free optimizer's train(), false its eval() (the parameters move
// to the average that evaluation and SaveModel use); other optimizers ignore it.
func (o *Optimizer) SetTraining(training bool) error {
	return do(o.ref(), func(h capi.Optimizer, e *string) { h.SetTraining(training, e) })
}
func (o *Optimizer) LR(group int) (float64, error) {
	return with(o.ref(), func(h capi.Optimizer, e *string) float64 { return h.GetLr(int64(group), e) })
}

// Hyperparameter is PyTorch's param_groups[group][key] for a numeric key: "momentum", "beta1",
// "weight_decay", ... (accelerate.h's acc_optimizer_get_hyperparameter).
func (o *Optimizer) Hyperparameter(group int, key string) (float64, error) {
	return with(o.ref(), func(h capi.Optimizer, e *string) float64 { return h.GetHyperparameter(int64(group), key, e) })
}
func (o *Optimizer) SetLR(group int, lr float64) error {
	return do(o.ref(), func(h capi.Optimizer, e *string) { h.SetLr(int64(group), lr, e) })
}

// State is PyTorch's optimizer.state[p][field] for the parameter named param (a copy): Adam's
// "exp_avg", ASGD's averaged parameter "ax", ... (accelerate.h's acc_optimizer_state).
func (o *Optimizer) State(param, field string) (*Tensor, error) {
	return wrapTensor(with(o.ref(), func(h capi.Optimizer, e *string) capi.Tensor { return h.StateOf(param, field, e) }))
}

// StateFields names the fields State gives for param: none before its first step.
func (o *Optimizer) StateFields(param string) ([]string, error) {
	return stringList(with(o.ref(), func(h capi.Optimizer, e *string) capi.StringList { return h.StateFields(param, e) }))
}
func (o *Optimizer) NumParamGroups() (int, error) {
	n, err := with(o.ref(), func(h capi.Optimizer, e *string) int64 { return h.NumParamGroups(e) })
	return int(n), err
}

// AddParamGroup moves the named parameters into a new group (overrides may be nil).
func (o *Optimizer) AddParamGroup(names []string, overrides *Options) error {
	oh, err := overrides.handleOf()
	if err != nil {
		return err
	}
	encoded, err := nulJoined("AddParamGroup: the parameter name", names)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(overrides)
	return do(o.ref(), func(h capi.Optimizer, e *string) { h.AddParamGroup(encoded, oh, e) })
}

// AddParamGroupMatching moves the trainable parameters whose names match patterns (as
// SetRequiresGrad matches them) into a new group (overrides may be nil); it returns how many moved.
func (o *Optimizer) AddParamGroupMatching(patterns string, overrides *Options) (int, error) {
	oh, err := overrides.handleOf()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(overrides)
	n, err := with(o.ref(), func(h capi.Optimizer, e *string) int64 { return h.AddParamGroupMatching(patterns, oh, e) })
	return int(n), err
}

// Scheduler of an optimizer's learning rate ("linear", "cosine", ... see accelerate.h).
type Scheduler struct{ r ref[capi.Scheduler] }

func adoptScheduler(h capi.Scheduler, err error) (*Scheduler, error) {
	return adopt(h, err, capi.DeleteScheduler, func(r ref[capi.Scheduler]) *Scheduler { return &Scheduler{r} }, (*Scheduler).Close)
}
func (s *Scheduler) Close() error { return closeObject(s, s.ref()) }

func (s *Scheduler) ref() *ref[capi.Scheduler] {
	if s == nil {
		return nil
	}
	return &s.r
}

func NewScheduler(opt *Optimizer, name string, opts *Options) (*Scheduler, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(opts)
	return adoptScheduler(with(opt.ref(), func(h capi.Optimizer, e *string) capi.Scheduler {
		return capi.NewScheduler(h, name, oh, e)
	}))
}
func (s *Scheduler) Step() error {
	return do(s.ref(), func(h capi.Scheduler, e *string) { h.Step(e) })
}

// StepMetric is a reduce_lr_on_plateau scheduler's step, with the metric it follows.
func (s *Scheduler) StepMetric(metric float64) error {
	return do(s.ref(), func(h capi.Scheduler, e *string) { h.StepMetric(metric, e) })
}

// Then makes the scheduler a sequence (PyTorch's SequentialLR): from step milestone on, the
// schedule name (opts may be nil) takes over. Before the first step and before Prepare.
func (s *Scheduler) Then(milestone int64, name string, opts *Options) error {
	oh, err := opts.handleOf()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(opts)
	return do(s.ref(), func(h capi.Scheduler, e *string) { h.Then(milestone, name, oh, e) })
}

// Chain makes the scheduler a chain (PyTorch's ChainedScheduler): the schedule name (opts may be
// nil) steps with it, each step from the rate the schedules before it left. Before the first step and
// before Prepare.
func (s *Scheduler) Chain(name string, opts *Options) error {
	oh, err := opts.handleOf()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(opts)
	return do(s.ref(), func(h capi.Scheduler, e *string) { h.Chain(name, oh, e) })
}
func (s *Scheduler) LastLR(group int) (float64, error) {
	return with(s.ref(), func(h capi.Scheduler, e *string) float64 { return h.GetLastLr(int64(group), e) })
}
func (s *Scheduler) StepCount() (int64, error) {
	return with(s.ref(), func(h capi.Scheduler, e *string) int64 { return h.GetStep(e) })
}

// AveragedModel is PyTorch's AveragedModel (torch.optim.swa_utils): averages of a model's
// parameters and buffers over training, equal ones (stochastic weight averaging, SWA) or an
// exponential moving average (EMA). It keeps the averages only, not a second model: CopyTo writes
// them into a model (e.g. a second copy for evaluation), Swap exchanges them with the training
// model's values (swap again to go on training).
type AveragedModel struct{ r ref[capi.AveragedModel] }

func (a *AveragedModel) Close() error { return closeObject(a, a.ref()) }

func (a *AveragedModel) ref() *ref[capi.AveragedModel] {
	if a == nil {
		return nil
	}
	return &a.r
}

// NewAveragedModel copies model's parameters and buffers (a prepared model's too). opts:
// AveragedModelOptions (strategy "swa" or "ema", decay, use_buffers, device) or nil (SWA). A model
// sharded at rest (zero_stage 3) is ErrUnsupported.
func NewAveragedModel(model *Model, opts *Options) (*AveragedModel, error) {
	oh, err := opts.handleOf()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(opts)
	h, err := with(model.ref(), func(h capi.Model, e *string) capi.AveragedModel { return capi.NewAveragedModel(h, oh, e) })
	return adopt(h, err, capi.DeleteAveragedModel, func(r ref[capi.AveragedModel]) *AveragedModel { return &AveragedModel{r} }, (*AveragedModel).Close)
}

// UpdateBN is torch.optim.swa_utils.update_bn(loader, model): after the averages were put into m
// (Swap or CopyTo), its BatchNorm layers' running statistics are recomputed as plain averages over
// the loader's next epoch (the loader between epochs; layer-spec models, a TorchScript BatchNorm is
// ErrUnsupported). A model without BatchNorm is left alone.
func (m *Model) UpdateBN(loader *DataLoader) error {
	lh, err := loader.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(loader)
	return do(m.ref(), func(h capi.Model, e *string) { h.UpdateBn(lh, e) })
}

// averagedWith runs f on a's handle and model's.
func (a *AveragedModel) averagedWith(model *Model, f func(h capi.AveragedModel, mh capi.Model, e *string)) error {
	mh, err := model.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(model)
	return do(a.ref(), func(h capi.AveragedModel, e *string) { f(h, mh, e) })
}

// Update is update_parameters(model), after the optimizer's step: the first update copies the
// model's values, each later one averages them in (SWA: avg + (value - avg) / (n + 1); EMA: lerp
// by 1 - decay); buffers are copied unless use_buffers. model must have the parameters and buffers
// the averages were made from (names, shapes, dtypes; ErrInvalidArgument names the first that
// differs).
func (a *AveragedModel) Update(model *Model) error {
	return a.averagedWith(model, func(h capi.AveragedModel, mh capi.Model, e *string) { h.Update(mh, e) })
}

// Count is the number of updates so far (AveragedModel's n_averaged).
func (a *AveragedModel) Count() (int64, error) {
	return with(a.ref(), func(h capi.AveragedModel, e *string) int64 { return h.Count(e) })
}

// CopyTo writes the averages into model's parameters and buffers (checked as for Update).
func (a *AveragedModel) CopyTo(model *Model) error {
	return a.averagedWith(model, func(h capi.AveragedModel, mh capi.Model, e *string) { h.CopyTo(mh, e) })
}

// Swap exchanges the averages with model's own values: evaluate or SaveModel the averaged weights,
// then swap back (on every process of a prepared model).
func (a *AveragedModel) Swap(model *Model) error {
	return a.averagedWith(model, func(h capi.AveragedModel, mh capi.Model, e *string) { h.Swap(mh, e) })
}

// StateDict is AveragedModel.state_dict(): "n_averaged" (int64, 0-dim), then "module.<name>" for
// each parameter and buffer (aliasing the averages).
func (a *AveragedModel) StateDict() (*TensorList, error) {
	return wrapTensorList(with(a.ref(), func(h capi.AveragedModel, e *string) capi.TensorList { return h.StateDict(e) }))
}

// LoadStateDict loads such a state (Python's AveragedModel.state_dict() too): every name, shape
// and dtype must match and n_averaged must not be negative, checked before anything changes.
func (a *AveragedModel) LoadStateDict(state *TensorList) error {
	sh, err := state.ref().get()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(state)
	return do(a.ref(), func(h capi.AveragedModel, e *string) { h.LoadStateDict(sh, e) })
}
