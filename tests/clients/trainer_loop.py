"""transformers' Trainer on a small Llama built from a config (nothing downloaded).

Usage: python trainer_loop.py --out DIR [--cpu] [--steps N] [--save-steps N] [--resume CHECKPOINT] [RUN ...]
(also under torchrun), where each RUN (default: fp32) is one of RUNS below, trained in order by one process
(transformers' import costs more than a run). Each run writes DIR/RUN/rank<N>.json with the device the Trainer
chose, the loss of every step and the final parameters.
"""

import argparse
import json
import os

import torch
import transformers


def dataset(count=48, length=16):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 128, (count, length), generator=g)
    return [{"input_ids": row, "labels": row} for row in ids]


class StepsTrained(transformers.TrainerCallback):
    """The optimizer steps this process ran (a resumed run starts after its checkpoint)."""

    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


# The TrainingArguments (and attention implementation) each run sets.
RUNS = {
    "fp32": {},
    "bf16": {"bf16": True},
    "fp16": {"fp16": True},
    "activation_checkpointing": {"activation_checkpointing": True},
    "sdpa": {"attn": "sdpa"},
    "flash_attention_2": {"attn": "flash_attention_2"},
    "torch_compile": {"torch_compile": True},
}


def train(name, args):
    options = dict(RUNS[name])
    attn = options.pop("attn", "eager")
    out = os.path.join(args.out, name)
    transformers.set_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation=attn)
    training = transformers.TrainingArguments(
        output_dir=os.path.join(out, "checkpoints"),
        per_device_train_batch_size=4,
        max_steps=args.steps,
        learning_rate=5e-3,
        logging_steps=1,
        report_to=[],
        seed=0,
        data_seed=0,
        use_cpu=args.cpu,
        dataloader_num_workers=0,
        save_strategy="steps" if args.save_steps else "no",
        save_steps=args.save_steps or 500,
        disable_tqdm=True,
        **options,
    )
    trained = StepsTrained()
    trainer = transformers.Trainer(model=model, args=training, train_dataset=dataset(), callbacks=[trained])
    trainer.train(resume_from_checkpoint=args.resume)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    rank = training.process_index
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(
            {
                "device": str(training.device),
                "param_device": str(next(trainer.model.parameters()).device),
                "parallel_mode": str(training.parallel_mode),
                "world_size": training.world_size,
                "scaler": type(trainer.accelerator.scaler).__module__
                if trainer.accelerator.scaler is not None
                else None,
                "trained_steps": trained.steps,
                "steps": [entry["step"] for entry in trainer.state.log_history if "loss" in entry],
                "losses": losses,
                "params": [p.detach().float().cpu().flatten().tolist() for p in trainer.model.parameters()],
            },
            f,
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--save-steps", type=int, default=0)
    parser.add_argument("--resume")
    parser.add_argument("runs", nargs="*", metavar="RUN")
    args = parser.parse_args()
    unknown = sorted(set(args.runs) - set(RUNS))
    if unknown:
        parser.error(f"unknown runs {unknown}; choose from {list(RUNS)}")
    for name in args.runs or ["fp32"]:
        train(name, args)


if __name__ == "__main__":
    main()
