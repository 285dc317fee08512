# ruff: noqa: UP010, UP030, UP031, UP032, B007, RUF059, RUF100, SIM113, SIM117  (the style of Fluid 1.5 scripts)
"""Paddle book model rnn_encoder_decoder (Fluid 1.5's tests/book): a bidirectional
LSTM encoder whose last states boot a decoder written step by step (an LSTM cell
of fc, sigmoid and tanh layers inside a DynamicRNN, two memories), trained on
WMT14, written as for Fluid 1.5. Only the imports differ from a Paddle script
(``paddle`` is fluid-hw's ``paddle_compat``, whose ``dataset.wmt14`` is a small
synthetic stand-in).

    python examples/book/rnn_encoder_decoder.py
"""

from __future__ import print_function

import math
import sys

import numpy as np

import fluid_hw as fluid
import fluid_hw.paddle_compat as paddle
from fluid_hw import framework

dict_size = 30000
source_dict_dim = target_dict_dim = dict_size
hidden_dim = 32
embedding_dim = 16
batch_size = 10
max_length = 50
topk_size = 50
encoder_size = decoder_size = hidden_dim
IS_SPARSE = True
USE_PEEPHOLES = False


def bi_lstm_encoder(input_seq, hidden_size):
    input_forward_proj = fluid.layers.fc(input=input_seq, size=hidden_size * 4,
                                         bias_attr=True)
    forward, _ = fluid.layers.dynamic_lstm(input=input_forward_proj, size=hidden_size * 4,
                                           use_peepholes=USE_PEEPHOLES)
    input_backward_proj = fluid.layers.fc(input=input_seq, size=hidden_size * 4,
                                          bias_attr=True)
    backward, _ = fluid.layers.dynamic_lstm(input=input_backward_proj,
                                            size=hidden_size * 4, is_reverse=True,
                                            use_peepholes=USE_PEEPHOLES)
    forward_last = fluid.layers.sequence_last_step(input=forward)
    backward_first = fluid.layers.sequence_first_step(input=backward)
    return forward_last, backward_first


# an LSTM cell made of layers, for the decoder's steps
def lstm_step(x_t, hidden_t_prev, cell_t_prev, size):
    def linear(inputs):
        return fluid.layers.fc(input=inputs, size=size, bias_attr=True)

    forget_gate = fluid.layers.sigmoid(x=linear([hidden_t_prev, x_t]))
    input_gate = fluid.layers.sigmoid(x=linear([hidden_t_prev, x_t]))
    output_gate = fluid.layers.sigmoid(x=linear([hidden_t_prev, x_t]))
    cell_tilde = fluid.layers.tanh(x=linear([hidden_t_prev, x_t]))

    cell_t = fluid.layers.sums(input=[
        fluid.layers.elementwise_mul(x=forget_gate, y=cell_t_prev),
        fluid.layers.elementwise_mul(x=input_gate, y=cell_tilde)
    ])
    hidden_t = fluid.layers.elementwise_mul(x=output_gate, y=fluid.layers.tanh(x=cell_t))
    return hidden_t, cell_t


def lstm_decoder_without_attention(target_embedding, decoder_boot, context,
                                   decoder_size):
    rnn = fluid.layers.DynamicRNN()
    cell_init = fluid.layers.fill_constant_batch_size_like(
        input=decoder_boot, value=0.0, shape=[-1, decoder_size], dtype='float32')
    cell_init.stop_gradient = False

    with rnn.block():
        current_word = rnn.step_input(target_embedding)
        context = rnn.static_input(context)
        hidden_mem = rnn.memory(init=decoder_boot, need_reorder=True)
        cell_mem = rnn.memory(init=cell_init)
        decoder_inputs = fluid.layers.concat(input=[context, current_word], axis=1)
        h, c = lstm_step(decoder_inputs, hidden_mem, cell_mem, decoder_size)
        rnn.update_memory(hidden_mem, h)
        rnn.update_memory(cell_mem, c)
        out = fluid.layers.fc(input=h, size=target_dict_dim, bias_attr=True, act='softmax')
        rnn.output(out)
    return rnn()


def seq_to_seq_net():
    """Construct a seq2seq network."""
    src_word_idx = fluid.layers.data(name='source_sequence', shape=[1], dtype='int64',
                                     lod_level=1)
    src_embedding = fluid.layers.embedding(input=src_word_idx,
                                           size=[source_dict_dim, embedding_dim],
                                           dtype='float32')
    src_forward_last, src_backward_first = bi_lstm_encoder(input_seq=src_embedding,
                                                           hidden_size=encoder_size)
    encoded_vector = fluid.layers.concat(input=[src_forward_last, src_backward_first],
                                         axis=1)
    decoder_boot = fluid.layers.fc(input=src_backward_first, size=decoder_size,
                                   bias_attr=False, act='tanh')

    trg_word_idx = fluid.layers.data(name='target_sequence', shape=[1], dtype='int64',
                                     lod_level=1)
    trg_embedding = fluid.layers.embedding(input=trg_word_idx,
                                           size=[target_dict_dim, embedding_dim],
                                           dtype='float32')
    prediction = lstm_decoder_without_attention(trg_embedding, decoder_boot,
                                                encoded_vector, decoder_size)
    label = fluid.layers.data(name='label_sequence', shape=[1], dtype='int64', lod_level=1)
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    return avg_cost, prediction


def optimizer_func():
    return fluid.optimizer.Adagrad(learning_rate=1e-4)


def train(use_cuda, save_dirname=None, max_steps=4, seed=None):
    """Train (the book stops after 5 batches); return the training losses, one per
    step."""
    if seed is not None:
        framework.default_main_program().random_seed = seed
        framework.default_startup_program().random_seed = seed
    [avg_cost, prediction] = seq_to_seq_net()

    optimizer = optimizer_func()
    optimizer.minimize(avg_cost)

    train_data = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.wmt14.train(dict_size), buf_size=1000),
        batch_size=batch_size)

    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(framework.default_startup_program())

    feed_order = ['source_sequence', 'target_sequence', 'label_sequence']
    feed_list = [framework.default_main_program().global_block().var(var_name)
                 for var_name in feed_order]
    feeder = fluid.DataFeeder(feed_list, place)

    losses = []
    batch_id = 0
    for pass_id in range(2):
        for data in train_data():
            outs = exe.run(framework.default_main_program(), feed=feeder.feed(data),
                           fetch_list=[avg_cost])
            avg_cost_val = np.array(outs[0])
            losses.append(float(avg_cost_val[0]))
            print('pass_id=' + str(pass_id) + ' batch=' + str(batch_id) + " avg_cost="
                  + str(avg_cost_val))
            if math.isnan(float(avg_cost_val[0])):
                sys.exit("got NaN loss, training failed.")
            if batch_id >= max_steps:
                if save_dirname is not None:
                    fluid.io.save_inference_model(save_dirname,
                                                  ['source_sequence', 'target_sequence'],
                                                  [prediction], exe)
                return losses
            batch_id += 1
    return losses


def infer(use_cuda, save_dirname=None):
    """Load the saved inference model and run it on random LoD input; return the
    next-word distributions (a LoDTensor, one row per target word)."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names,
         fetch_targets] = fluid.io.load_inference_model(save_dirname, exe)
        # Two sequences of 4 and 6 words; each word is one id.
        lod = [[4, 6]]
        base_shape = [1]
        # The range of random integers is [low, high]
        word_data = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                      high=1)
        trg_word = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                     high=1)
        assert feed_target_names[0] == 'source_sequence'
        assert feed_target_names[1] == 'target_sequence'
        results = exe.run(inference_program,
                          feed={feed_target_names[0]: word_data,
                                feed_target_names[1]: trg_word},
                          fetch_list=fetch_targets, return_numpy=False)
        print(results[0].recursive_sequence_lengths())
        np_data = np.array(results[0])
        print("Inference shape: ", np_data.shape)
        print("Inference results: ", np_data)
    return results[0]


def main(use_cuda):
    if use_cuda and not fluid.core.is_compiled_with_cuda():
        return
    save_dirname = "rnn_encoder_decoder.inference.model"
    train(use_cuda, save_dirname)
    infer(use_cuda, save_dirname)


if __name__ == '__main__':
    main(use_cuda=False)
