# ruff: noqa: UP010, UP030, UP031, UP032, B007, RUF059, RUF100, SIM113, SIM117  (the style of Fluid 1.5 scripts)
"""Paddle book chapter 7, label_semantic_roles: a deep bidirectional LSTM over
eight features (word, five context words, predicate, mark) with pretrained word
embeddings, trained with a linear-chain CRF and decoded with ``crf_decoding``, on
CoNLL-2005, written as for Fluid 1.5. Only the imports differ from a Paddle script
(``paddle`` is fluid-hw's ``paddle_compat``, whose ``dataset.conll05`` is a small
synthetic stand-in).

    python examples/book/label_semantic_roles.py --num_epochs 1
"""

from __future__ import print_function

import argparse
import time

import fluid_hw.paddle_compat.dataset.conll05 as conll05
import numpy as np

import fluid_hw as fluid
import fluid_hw.paddle_compat as paddle

word_dict, verb_dict, label_dict = conll05.get_dict()
word_dict_len = len(word_dict)
label_dict_len = len(label_dict)
pred_dict_len = len(verb_dict)

mark_dict_len = 2
word_dim = 32
mark_dim = 5
hidden_dim = 512
depth = 8
mix_hidden_lr = 1e-3

IS_SPARSE = True
PASS_NUM = 10
BATCH_SIZE = 10

embedding_name = 'emb'


def load_parameter(file_name, h, w):
    with open(file_name, 'rb') as f:
        f.read(16)  # skip header.
        return np.fromfile(f, dtype=np.float32).reshape(h, w)


def db_lstm(word, predicate, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, mark, **ignored):
    # 8 features
    predicate_embedding = fluid.layers.embedding(
        input=predicate, size=[pred_dict_len, word_dim], dtype='float32',
        is_sparse=IS_SPARSE, param_attr='vemb')
    mark_embedding = fluid.layers.embedding(
        input=mark, size=[mark_dict_len, mark_dim], dtype='float32', is_sparse=IS_SPARSE)

    word_input = [word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2]
    emb_layers = [
        fluid.layers.embedding(
            size=[word_dict_len, word_dim], input=x,
            param_attr=fluid.ParamAttr(name=embedding_name, trainable=False))
        for x in word_input
    ]
    emb_layers.append(predicate_embedding)
    emb_layers.append(mark_embedding)

    hidden_0_layers = [fluid.layers.fc(input=emb, size=hidden_dim, act='tanh')
                       for emb in emb_layers]
    hidden_0 = fluid.layers.sums(input=hidden_0_layers)

    lstm_0 = fluid.layers.dynamic_lstm(
        input=hidden_0, size=hidden_dim, candidate_activation='relu',
        gate_activation='sigmoid', cell_activation='sigmoid')

    # stack L-LSTM and R-LSTM with direct edges
    input_tmp = [hidden_0, lstm_0]
    for i in range(1, depth):
        mix_hidden = fluid.layers.sums(input=[
            fluid.layers.fc(input=input_tmp[0], size=hidden_dim, act='tanh'),
            fluid.layers.fc(input=input_tmp[1], size=hidden_dim, act='tanh')
        ])
        lstm = fluid.layers.dynamic_lstm(
            input=mix_hidden, size=hidden_dim, candidate_activation='relu',
            gate_activation='sigmoid', cell_activation='sigmoid',
            is_reverse=((i % 2) == 1))
        input_tmp = [mix_hidden, lstm]

    feature_out = fluid.layers.sums(input=[
        fluid.layers.fc(input=input_tmp[0], size=label_dict_len, act='tanh'),
        fluid.layers.fc(input=input_tmp[1], size=label_dict_len, act='tanh')
    ])
    return feature_out


def train(use_cuda, save_dirname=None, num_epochs=PASS_NUM, max_steps=None, seed=None):
    """Train; return the training losses, one per step."""
    # define data layers
    word = fluid.layers.data(name='word_data', shape=[1], dtype='int64', lod_level=1)
    predicate = fluid.layers.data(name='verb_data', shape=[1], dtype='int64', lod_level=1)
    ctx_n2 = fluid.layers.data(name='ctx_n2_data', shape=[1], dtype='int64', lod_level=1)
    ctx_n1 = fluid.layers.data(name='ctx_n1_data', shape=[1], dtype='int64', lod_level=1)
    ctx_0 = fluid.layers.data(name='ctx_0_data', shape=[1], dtype='int64', lod_level=1)
    ctx_p1 = fluid.layers.data(name='ctx_p1_data', shape=[1], dtype='int64', lod_level=1)
    ctx_p2 = fluid.layers.data(name='ctx_p2_data', shape=[1], dtype='int64', lod_level=1)
    mark = fluid.layers.data(name='mark_data', shape=[1], dtype='int64', lod_level=1)
    if seed is not None:
        fluid.default_startup_program().random_seed = seed
        fluid.default_main_program().random_seed = seed

    # define network topology
    feature_out = db_lstm(word=word, predicate=predicate, ctx_n2=ctx_n2, ctx_n1=ctx_n1,
                          ctx_0=ctx_0, ctx_p1=ctx_p1, ctx_p2=ctx_p2, mark=mark)

    target = fluid.layers.data(name='target', shape=[1], dtype='int64', lod_level=1)
    crf_cost = fluid.layers.linear_chain_crf(
        input=feature_out, label=target,
        param_attr=fluid.ParamAttr(name='crfw', learning_rate=mix_hidden_lr))
    avg_cost = fluid.layers.mean(crf_cost)

    sgd_optimizer = fluid.optimizer.SGD(
        learning_rate=fluid.layers.exponential_decay(
            learning_rate=0.01, decay_steps=100000, decay_rate=0.5, staircase=True))
    sgd_optimizer.minimize(avg_cost)

    crf_decode = fluid.layers.crf_decoding(input=feature_out,
                                           param_attr=fluid.ParamAttr(name='crfw'))

    train_data = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.conll05.test(), buf_size=8192),
        batch_size=BATCH_SIZE)

    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    feeder = fluid.DataFeeder(
        feed_list=[word, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, predicate, mark, target],
        place=place)
    exe = fluid.Executor(place)

    exe.run(fluid.default_startup_program())
    embedding_param = fluid.global_scope().find_var(embedding_name).get_tensor()
    embedding_param.set(load_parameter(conll05.get_embedding(), word_dict_len, word_dim),
                        place)

    start_time = time.time()
    batch_id = 0
    losses = []
    for pass_id in range(num_epochs):
        for data in train_data():
            cost, decoded = exe.run(fluid.default_main_program(), feed=feeder.feed(data),
                                    fetch_list=[avg_cost, crf_decode])
            cost = cost[0]
            losses.append(float(cost))
            if batch_id % 10 == 0:
                print("avg_cost:" + str(cost))
                if batch_id != 0:
                    print("second per batch: " + str((time.time() - start_time) / batch_id))
            batch_id = batch_id + 1
            if max_steps is not None and batch_id >= max_steps:
                break
        if max_steps is not None and batch_id >= max_steps:
            break
    if save_dirname is not None:
        fluid.io.save_inference_model(save_dirname, [
            'word_data', 'verb_data', 'ctx_n2_data', 'ctx_n1_data', 'ctx_0_data',
            'ctx_p1_data', 'ctx_p2_data', 'mark_data'
        ], [feature_out], exe)
    return losses


def infer(use_cuda, save_dirname=None):
    """Load the saved inference model and run it on random LoD inputs; return the
    emission scores (a LoDTensor, one row per word)."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names,
         fetch_targets] = fluid.io.load_inference_model(save_dirname, exe)
        # Three sentences of 3, 4 and 2 words; each word is one id.
        lod = [[3, 4, 2]]
        base_shape = [1]
        # The range of random integers is [low, high]
        word = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                 high=word_dict_len - 1)
        pred = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                 high=pred_dict_len - 1)
        ctx_n2 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                   high=word_dict_len - 1)
        ctx_n1 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                   high=word_dict_len - 1)
        ctx_0 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                  high=word_dict_len - 1)
        ctx_p1 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                   high=word_dict_len - 1)
        ctx_p2 = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                   high=word_dict_len - 1)
        mark = fluid.create_random_int_lodtensor(lod, base_shape, place, low=0,
                                                 high=mark_dict_len - 1)
        assert feed_target_names[0] == 'word_data'
        assert feed_target_names[1] == 'verb_data'
        assert feed_target_names[7] == 'mark_data'
        results = exe.run(inference_program,
                          feed={feed_target_names[0]: word, feed_target_names[1]: pred,
                                feed_target_names[2]: ctx_n2, feed_target_names[3]: ctx_n1,
                                feed_target_names[4]: ctx_0, feed_target_names[5]: ctx_p1,
                                feed_target_names[6]: ctx_p2, feed_target_names[7]: mark},
                          fetch_list=fetch_targets, return_numpy=False)
        print(results[0].lod())
        np_data = np.array(results[0])
        print("Inference Shape: ", np_data.shape)
    return results[0]


def main(use_cuda, num_epochs):
    if use_cuda and not fluid.core.is_compiled_with_cuda():
        return
    # Directory for saving the trained model
    save_dirname = "label_semantic_roles.inference.model"
    train(use_cuda, save_dirname, num_epochs=num_epochs)
    infer(use_cuda, save_dirname)


if __name__ == '__main__':
    parser = argparse.ArgumentParser("label_semantic_roles")
    parser.add_argument('--use_gpu', type=int, default=0)
    parser.add_argument('--num_epochs', type=int, default=PASS_NUM)
    args = parser.parse_args()
    main(args.use_gpu, args.num_epochs)
