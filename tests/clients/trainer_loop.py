"""transformers' Trainer on a small Llama built from a config (nothing downloaded).

Usage: python trainer_loop.py --out DIR [--cpu] [--bf16 | --fp16] [--gradient-checkpointing]
       [--attn eager|sdpa|flash_attention_2] [--steps N] [--save-steps N] [--resume CHECKPOINT] [--compile]
(also under torchrun). Each process writes DIR/rank<N>.json with the device the Trainer chose, the
loss of every step and the final parameters.
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--attn", default="eager")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--save-steps", type=int, default=0)
    parser.add_argument("--resume")
    parser.add_argument("--compile", action="store_true")
    args = parser.parse_args()

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
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation=args.attn)
    training = transformers.TrainingArguments(
        output_dir=os.path.join(args.out, "checkpoints"),
        per_device_train_batch_size=4,
        max_steps=args.steps,
        learning_rate=5e-3,
        logging_steps=1,
        report_to=[],
        seed=0,
        data_seed=0,
        use_cpu=args.cpu,
        bf16=args.bf16,
        fp16=args.fp16,
        activation_checkpointing=args.gradient_checkpointing,
        dataloader_num_workers=0,
        save_strategy="steps" if args.save_steps else "no",
        save_steps=args.save_steps or 500,
        torch_compile=args.compile,
        disable_tqdm=True,
    )
    trained = StepsTrained()
    trainer = transformers.Trainer(model=model, args=training, train_dataset=dataset(), callbacks=[trained])
    trainer.train(resume_from_checkpoint=args.resume)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    rank = training.process_index
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
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


if __name__ == "__main__":
    main()
